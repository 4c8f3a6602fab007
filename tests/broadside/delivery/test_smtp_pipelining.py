"""SmtpTransport with and without ESMTP PIPELINING (RFC 2920), against real servers on
loopback: aiosmtpd offering PIPELINING or not, and a scripted socket server for the replies
aiosmtpd cannot give (a 554 to DATA after a good RCPT, a 354 after a refused RCPT, a
connection cut in the middle of the pipelined group).

Every failure must still say where it happened: mail | rcpt | data-command (provably not
accepted) or data-body | data-end (after the body).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from broadside.delivery.smtp import SmtpTransport
from broadside.delivery.transports import DeliveryError
from jobs.classify import classify
from tests.smtp_server import Scripted, SmtpServer, default

MESSAGE = b"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nHello.\r\n.dot line\r\n"


@pytest.fixture(params=[True, False], ids=["pipelining", "lockstep"])
def server(request) -> Iterator[SmtpServer]:
    server = SmtpServer(pipelining=request.param).start()
    server.offers_pipelining = request.param  # type: ignore[attr-defined]
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _close_transports(monkeypatch) -> Iterator[None]:
    """Every transport a test opens is closed after it (no socket left for the GC)."""
    opened: list[SmtpTransport] = []
    init = SmtpTransport.__init__

    def tracked(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(SmtpTransport, "__init__", tracked)
    yield
    for transport in opened:
        transport.close()


def send(transport: SmtpTransport, rcpt: str, message: bytes = MESSAGE):
    return transport.send("news@example.com", rcpt, message)


def test_messages_go_on_one_connection_pipelined_only_when_offered(server):
    transport = SmtpTransport(server.url)
    for i in range(3):
        assert send(transport, f"r{i}@example.com").code == 250
    received = server.wait_for(3)
    assert [m.rcpt_tos for m in received] == [["r0@example.com"], ["r1@example.com"], ["r2@example.com"]]
    assert all(m.pipelined == server.offers_pipelining for m in received)
    assert len({m.peer for m in received}) == 1  # one reused connection
    assert received[0].data.replace(b"\r\n", b"\n").endswith(b"Hello.\n.dot line\n")
    transport.close()


def test_pipelining_can_be_turned_off_by_the_client():
    server = SmtpServer(pipelining=True).start()
    try:
        transport = SmtpTransport(server.url, pipelining=False)
        send(transport, "r@example.com")
        assert server.wait_for(1)[0].pipelined is False
        transport.close()
    finally:
        server.stop()


def test_a_refused_rcpt_says_rcpt_and_the_connection_stays_usable(server):
    server.script.rcpt_replies["gone@example.com"] = ["550 5.1.1 No such user"]
    transport = SmtpTransport(server.url)
    with pytest.raises(DeliveryError) as refused:
        send(transport, "gone@example.com")
    assert (refused.value.phase, refused.value.code) == ("rcpt", 550)
    assert classify(refused.value).kind == "recipient"
    conn = transport.conn
    assert conn is not None  # RSET, not a new connection
    assert send(transport, "next@example.com").code == 250
    assert transport.conn is conn
    received = server.wait_for(1)
    assert [m.rcpt_tos for m in received] == [["next@example.com"]]  # nothing for the refused one


def test_a_4xx_rcpt_is_transient_at_rcpt(server):
    server.script.rcpt_replies["busy@example.com"] = ["451 4.3.0 Try again later"]
    transport = SmtpTransport(server.url)
    with pytest.raises(DeliveryError) as refused:
        send(transport, "busy@example.com")
    assert (refused.value.phase, refused.value.code) == ("rcpt", 451)
    assert classify(refused.value).kind == "transient"
    assert send(transport, "busy@example.com").code == 250  # its second RCPT is accepted


@pytest.mark.parametrize("reply,kind", [("451 4.3.0 queue full", "transient"),
                                        ("554 5.7.1 content refused", "channel")])
def test_a_refusal_after_the_body_says_data_end(server, reply, kind):
    server.script.data_replies.append(reply)
    transport = SmtpTransport(server.url)
    with pytest.raises(DeliveryError) as refused:
        send(transport, "r@example.com")
    assert (refused.value.phase, refused.value.code) == ("data-end", int(reply[:3]))
    assert classify(refused.value).kind == kind
    assert send(transport, "r@example.com").code == 250  # the connection goes on


def test_a_connection_cut_after_the_body_is_ambiguous(server):
    server.script.drop_after_data.add("cut@example.com")
    transport = SmtpTransport(server.url)
    with pytest.raises(DeliveryError) as lost:
        send(transport, "cut@example.com")
    assert lost.value.phase == "data-body" and lost.value.network
    assert classify(lost.value).kind == "ambiguous"  # -> unknown, never resent
    assert send(transport, "after@example.com").code == 250  # a new connection
    assert len(server.wait_for(2)) == 2


def test_an_idle_connection_closed_by_the_server_is_reopened_once(server):
    transport = SmtpTransport(server.url)
    send(transport, "a@example.com")
    assert transport.conn is not None
    transport.conn.sock.shutdown(socket.SHUT_RDWR)  # as a server's idle timeout would leave it
    assert send(transport, "b@example.com").code == 250
    assert [m.rcpt_tos for m in server.wait_for(2)] == [["a@example.com"], ["b@example.com"]]


def test_an_address_with_a_line_break_is_refused_before_anything_is_written(server):
    transport = SmtpTransport(server.url)
    with pytest.raises(DeliveryError) as refused:
        send(transport, "a@example.com\r\nRCPT TO:<evil@example.com>")
    # Refused by us, not by the server: no reply code is made up for it.
    assert (refused.value.phase, refused.value.code, refused.value.ours) == ("rcpt", None, True)
    assert send(transport, "ok@example.com").code == 250
    assert server.recipients() == ["ok@example.com"]


def test_a_5xx_to_data_after_a_good_rcpt_says_data_command_and_resets():
    answers = iter([b"250 OK", b"250 OK", b"554 5.7.1 no thanks"])
    server = Scripted(lambda line: next(answers, None) or default(line))
    try:
        transport = SmtpTransport(server.url)
        with pytest.raises(DeliveryError) as refused:
            send(transport, "r@example.com")
        assert (refused.value.phase, refused.value.code) == ("data-command", 554)
        assert classify(refused.value).kind == "channel"
        assert server.bodies == []
        assert send(transport, "r@example.com").code == 250
        assert [line.upper() for line in server.lines[1:5]] == [
            b"MAIL FROM:<NEWS@EXAMPLE.COM>", b"RCPT TO:<R@EXAMPLE.COM>", b"DATA", b"RSET"]
    finally:
        server.close()


def test_a_354_after_a_refused_rcpt_drops_the_connection_and_sends_no_body():
    """RFC 2920 says DATA must be refused when no RCPT was accepted; a server that says 354
    anyway gets no body and no final dot (an unterminated DATA delivers nothing)."""
    answers = iter([b"250 OK", b"550 5.1.1 no such user", b"354 go ahead anyway"])
    server = Scripted(lambda line: next(answers, None) or default(line))
    try:
        transport = SmtpTransport(server.url)
        with pytest.raises(DeliveryError) as refused:
            send(transport, "gone@example.com")
        assert (refused.value.phase, refused.value.code) == ("rcpt", 550)
        assert transport.conn is None and server.bodies == []
        assert send(transport, "next@example.com").code == 250  # a fresh connection
        assert len(server.bodies) == 1
    finally:
        server.close()


@pytest.mark.parametrize("cut_at,phase", [(b"RCPT", "rcpt"), (b"DATA", "data-command")])
def test_a_connection_cut_within_the_group_is_not_accepted_at_that_step(cut_at, phase):
    server = Scripted(lambda line: None if line.startswith(cut_at) else default(line))
    try:
        transport = SmtpTransport(server.url)
        with pytest.raises(DeliveryError) as lost:
            send(transport, "r@example.com")
        assert lost.value.phase == phase and lost.value.network
        assert classify(lost.value).kind == "transient"  # provably not accepted: retried
        assert server.bodies == []
    finally:
        server.close()


def test_a_mail_refusal_is_reported_at_mail_even_with_rcpt_and_data_already_sent():
    answers = iter([b"553 5.7.1 sender refused", b"503 5.5.1 need MAIL", b"503 5.5.1 need RCPT"])
    server = Scripted(lambda line: next(answers, None) or default(line))
    try:
        transport = SmtpTransport(server.url)
        with pytest.raises(DeliveryError) as refused:
            send(transport, "r@example.com")
        assert (refused.value.phase, refused.value.code) == ("mail", 553)
        assert classify(refused.value).kind == "channel"
        assert server.bodies == [] and transport.conn is not None
    finally:
        server.close()


def test_without_pipelining_in_ehlo_the_conversation_is_the_lockstep_one():
    server = Scripted(default, pipelining=False)
    try:
        transport = SmtpTransport(server.url)
        assert send(transport, "r@example.com").code == 250
        assert transport.conn is not None and not transport.conn.has_extn("pipelining")
        assert [line.upper() for line in server.lines[1:4]] == [
            b"MAIL FROM:<NEWS@EXAMPLE.COM>", b"RCPT TO:<R@EXAMPLE.COM>", b"DATA"]
    finally:
        server.close()
