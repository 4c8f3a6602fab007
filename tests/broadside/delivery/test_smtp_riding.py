"""SmtpTransport letting the next envelope ride behind a body (RFC 2920 3.1), against real
servers on loopback: aiosmtpd for the whole conversation, and the scripted socket server for
the replies aiosmtpd cannot give at the end of DATA (421, a cut connection).

What must hold: a rider is never sent on a verdict that says stop (`abandon` drops the
connection before any dot of it), no RSET lands behind a rider, and every failure still says
where it happened (mail | rcpt | data-command: provably not accepted)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broadside.delivery.smtp import SmtpTransport
from broadside.delivery.transports import DeliveryError
from tests.smtp_server import Scripted, SmtpServer, default

SENDER = "news@example.com"


def wire(n: int) -> bytes:
    return SmtpTransport.wire(f"Subject: {n}\r\n\r\nHello {n}.\r\n.dot line\r\n".encode())


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    server = Scripted(default)
    yield server
    server.close()


@pytest.fixture
def transports() -> Iterator[list[SmtpTransport]]:
    opened: list[SmtpTransport] = []
    yield opened
    for transport in opened:
        transport.close()


def open_transport(url: str, opened: list[SmtpTransport], **options) -> SmtpTransport:
    transport = SmtpTransport(url, **options)
    opened.append(transport)
    return transport


def commands(server: Scripted) -> list[bytes]:
    """The command lines after EHLO, upper-cased, the verb and its address only."""
    return [line.upper() for line in server.lines[1:]]


def test_each_envelope_rides_behind_the_previous_body_on_one_connection(transports):
    server = SmtpServer(pipelining=True).start()
    try:
        transport = open_transport(server.url, transports)
        assert transport.follows()  # no connection yet: assumed
        transport.start(SENDER, "r0@example.com", wire(0))
        assert transport.follows()
        transport.finish()
        transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
        assert transport.following
        assert transport.finish().code == 250
        transport.start_next(wire(2), then=(SENDER, "r3@example.com"))
        assert transport.finish().code == 250
        transport.start_next(wire(3))
        assert not transport.following
        assert transport.finish().code == 250
        received = server.wait_for(4)
        assert [m.rcpt_tos for m in received] == [[f"r{i}@example.com"] for i in range(4)]
        assert [m.followed for m in received] == [False, True, True, False]
        assert len({m.peer for m in received}) == 1
        assert received[2].data.replace(b"\r\n", b"\n").endswith(b"Hello 2.\n.dot line\n")
    finally:
        server.stop()


def test_no_envelope_rides_on_a_server_without_pipelining(transports):
    server = Scripted(default, pipelining=False)
    try:
        transport = open_transport(server.url, transports)
        assert transport.follows()  # not known before the first connection
        transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
        assert not transport.follows() and not transport.following
        assert transport.finish().code == 250
        assert commands(server) == [b"MAIL FROM:<NEWS@EXAMPLE.COM>", b"RCPT TO:<R1@EXAMPLE.COM>",
                                    b"DATA"]
    finally:
        server.close()


def test_pipelining_turned_off_here_means_no_rider(scripted, transports):
    transport = open_transport(scripted.url, transports, pipelining=False)
    assert not transport.follows()
    transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
    assert not transport.following
    transport.finish()


def test_a_refused_body_sends_no_rset_behind_the_rider_which_goes_on(scripted, transports):
    scripted.finals = [b"550 5.7.1 content refused"]
    transport = open_transport(scripted.url, transports)
    transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
    with pytest.raises(DeliveryError) as refused:
        transport.finish()
    assert (refused.value.phase, refused.value.code) == ("data-end", 550)
    transport.start_next(wire(2))
    assert transport.finish().code == 250
    assert b"RSET" not in commands(scripted)
    assert len(scripted.bodies) == 2 and scripted.connections == 1


def test_abandon_drops_the_connection_and_the_rider_is_never_delivered(scripted, transports):
    """The body's verdict says stop: the rider already has its 354, so no dot may follow; the
    connection goes, the server keeps no second message, and the next start opens anew."""
    transport = open_transport(scripted.url, transports)
    transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
    transport.finish()
    transport.abandon()
    assert transport.conn is None and not transport.following
    with pytest.raises(DeliveryError) as lost:
        transport.start_next(wire(2))
    assert lost.value.phase == "mail" and lost.value.network  # nothing of it was sent
    transport.start(SENDER, "r3@example.com", wire(3))
    assert transport.finish().code == 250
    assert [b.startswith(b"Subject: 1") for b in scripted.bodies] == [True, False]
    assert scripted.bodies[1].startswith(b"Subject: 3") and scripted.connections == 2
    assert b"QUIT" not in commands(scripted)[:7]  # no QUIT was written into the rider's DATA


def test_closing_with_a_rider_writes_no_quit_into_its_data(scripted, transports):
    transport = open_transport(scripted.url, transports)
    transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
    transport.finish()
    transport.close()
    assert transport.conn is None
    assert len(scripted.bodies) == 1 and b"QUIT" not in commands(scripted)


def test_a_421_to_the_body_closes_the_connection_and_the_rider_with_it(scripted, transports):
    scripted.finals = [b"421 4.3.2 shutting down"]
    transport = open_transport(scripted.url, transports)
    transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
    with pytest.raises(DeliveryError) as closing:
        transport.finish()
    assert closing.value.code == 421
    assert transport.conn is None and not transport.following


def test_a_cut_after_the_body_is_ambiguous_for_it_and_leaves_no_rider(scripted, transports):
    scripted.finals = [None]
    transport = open_transport(scripted.url, transports)
    transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
    with pytest.raises(DeliveryError) as lost:
        transport.finish()
    assert lost.value.phase == "data-body" and lost.value.network
    assert not transport.following


def test_a_refused_rider_says_rcpt_and_the_connection_stays_usable(transports):
    answers = {b"RCPT TO:<GONE@EXAMPLE.COM>": b"550 5.1.1 no such user",
               b"DATA": None}  # DATA after a refused RCPT: 554, as RFC 2920 asks
    seen: list[bytes] = []

    def answer(line: bytes) -> bytes | None:
        seen.append(line.upper())
        if line.upper() == b"DATA" and b"RCPT TO:<GONE@EXAMPLE.COM>" in seen[-2:]:
            return b"554 5.5.1 no valid recipients"
        return answers.get(line.upper()) or default(line)

    server = Scripted(answer)
    try:
        transport = open_transport(server.url, transports)
        transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "gone@example.com"))
        assert transport.finish().code == 250
        with pytest.raises(DeliveryError) as refused:
            transport.start_next(wire(2))
        assert (refused.value.phase, refused.value.code) == ("rcpt", 550)
        assert not transport.following and transport.conn is not None
        transport.start(SENDER, "r3@example.com", wire(3))
        assert transport.finish().code == 250
        assert len(server.bodies) == 2 and server.connections == 1
        assert commands(server)[6] == b"RSET"
    finally:
        server.close()


def test_a_rider_address_that_cannot_be_written_is_refused_at_its_turn(scripted, transports):
    transport = open_transport(scripted.url, transports)
    transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "evil@example.com\r\nDATA"))
    assert transport.finish().code == 250
    with pytest.raises(DeliveryError) as refused:
        transport.start_next(wire(2))
    # Refused by us, not by the server: no reply code is made up for it.
    assert (refused.value.phase, refused.value.code, refused.value.ours) == ("rcpt", None, True)
    transport.start(SENDER, "r3@example.com", wire(3))
    assert transport.finish().code == 250
    assert len(scripted.bodies) == 2 and scripted.connections == 1
    assert all(b"EVIL" not in line for line in commands(scripted))


def test_start_next_before_the_verdict_is_refused(scripted, transports):
    transport = open_transport(scripted.url, transports)
    transport.start(SENDER, "r1@example.com", wire(1), then=(SENDER, "r2@example.com"))
    with pytest.raises(AssertionError):
        transport.start_next(wire(2))


def test_a_pace_that_refuses_the_rider_sends_neither_body_nor_rider(scripted, transports):
    """The pace (with the lease's check, invariant 1) runs right before the rider's MAIL FROM,
    which goes out with this body: when it raises, neither goes, and the open DATA is dropped
    unterminated, so the server delivers nothing of it."""
    transport = open_transport(scripted.url, transports)
    transport.start(SENDER, "r0@example.com", wire(0))
    transport.finish()

    class LeaseGone(Exception):
        pass

    def refuse() -> None:
        raise LeaseGone

    with pytest.raises(LeaseGone):
        transport.start(SENDER, "r1@example.com", wire(1), pace=_once(refuse),
                        then=(SENDER, "r2@example.com"))
    assert transport.conn is None and not transport.following
    assert len(scripted.bodies) == 1


def _once(then_call):
    """A pace that lets the first call (this message's own MAIL FROM) through, then calls
    `then_call` (the rider's)."""
    calls = {"n": 0}

    def pace() -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            then_call()

    return pace
