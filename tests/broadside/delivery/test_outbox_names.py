"""The outbox's file names sort in the order the messages were written, and never collide:
one clock reading names each file (a name built from two readings could put a message written
just after a second's tick before the one written just before it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from broadside.delivery.eml_folder import OutboxTransport, list_outbox

MESSAGE = b"From: news@example.com\r\nTo: {rcpt}\r\nSubject: Issue {n}\r\n\r\nHello\r\n"


def clock(readings: list[int]) -> Iterator[int]:
    yield from readings


def send_all(transport: OutboxTransport, count: int, rcpt=lambda n: f"p{n}@example.com") -> list[str]:
    names = []
    for n in range(count):
        to = rcpt(n)
        result = transport.send("news@example.com", to, MESSAGE.replace(b"{rcpt}", to.encode())
                                .replace(b"{n}", str(n).encode()))
        names.append(result.reply.removeprefix("written to "))
    return names


def test_names_sort_in_send_order_across_a_seconds_tick_a_repeated_and_a_backward_clock(tmp_path: Path):
    second = 1_796_000_000 * 10**9
    readings = clock([
        second + 999_999_998,   # just before the tick
        second + 10**9 + 3,     # just after it
        second + 10**9 + 3,     # a coarse clock: the same reading twice
        second + 10**9 - 50,    # the clock stepped back (NTP)
        second + 2 * 10**9,
    ])
    transport = OutboxTransport(tmp_path, clock_ns=lambda: next(readings))
    # Each to a person whose address would sort the other way, so only the time orders them.
    names = send_all(transport, 5, rcpt=lambda n: f"{'zyxwv'[n]}@example.com")
    assert sorted(names) == names
    assert len(set(names)) == 5
    assert names[0].startswith("20261130T005320-") and "-999999998-" in names[0]
    assert "-000000003-" in names[1] and "-000000004-" in names[2] and "-000000005-" in names[3]
    assert sorted(os.listdir(tmp_path)) == names  # nothing else left behind (no .tmp)


def test_quick_successive_sends_on_the_real_clock_list_newest_first(tmp_path: Path):
    transport = OutboxTransport(tmp_path)
    names = send_all(transport, 300, rcpt=lambda n: f"{999 - n}@example.com")
    assert sorted(names) == names and len(set(names)) == 300
    listed = list_outbox(tmp_path, limit=5)
    assert [entry.subject for entry in listed] == [f"Issue {n}" for n in (299, 298, 297, 296, 295)]


def test_a_name_already_taken_by_another_process_is_never_overwritten(tmp_path: Path):
    moment = 1_796_000_000 * 10**9 + 5
    first = OutboxTransport(tmp_path, clock_ns=lambda: moment)
    second = OutboxTransport(tmp_path, clock_ns=lambda: moment)  # another worker, same instant
    a = send_all(first, 1, rcpt=lambda n: "same@example.com")[0]
    b = send_all(second, 1, rcpt=lambda n: "same@example.com")[0]
    assert a != b and a < b
    assert b"Issue 0" in (tmp_path / a).read_bytes() and (tmp_path / b).exists()
