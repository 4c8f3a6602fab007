"""The classifier's table of replies that name the recipient (a synchronous hard bounce), and
its verdict for an address that needs SMTPUTF8 where it is not offered."""

from __future__ import annotations

import pytest

from broadside.delivery.smtp_envelope import Offers, envelope_lines
from broadside.delivery.transports import DeliveryError
from jobs.classify import Step, classify, names_recipient, next_step

BOUNCES = [
    (550, "5.1.1 <x@example.com>: Recipient address rejected: User unknown"),
    (550, "5.1.0 Address rejected"),
    (550, "5.1.10 Recipient address has null MX"),
    (553, "5.1.3 Bad recipient address syntax"),
    (550, "5.1.2 Host unknown"),
    (551, "5.1.6 Mailbox has moved"),
    (550, "User unknown"),
    (550, "No such user here"),
    (550, "Requested action not taken: mailbox unavailable"),
]
NOT_BOUNCES = [
    (550, "5.7.1 Message rejected as spam"),
    (550, "5.7.1 Client host blocked using Spamhaus; user unknown"),  # the code decides
    (550, "5.7.26 Unauthenticated email is not accepted"),
    (552, "5.2.2 Mailbox full"),
    (552, "Mailbox full"),
    (550, "Mailbox unavailable: sending host blocked by policy"),
    (554, "5.1.1 Transaction failed"),
    (550, "5.2.1 Mailbox disabled"),
    (550, "5.1.100 not a status we know"),
]


@pytest.mark.parametrize(("code", "reply"), BOUNCES)
def test_replies_that_name_the_recipient_are_a_bounce(code, reply):
    assert names_recipient(code, reply)
    verdict = classify(DeliveryError("rcpt", code, reply))
    assert verdict.kind == "recipient" and verdict.bounce


@pytest.mark.parametrize(("code", "reply"), NOT_BOUNCES)
def test_policy_blocks_and_soft_kinds_are_not(code, reply):
    assert not names_recipient(code, reply)
    assert not classify(DeliveryError("rcpt", code, reply)).bounce


@pytest.mark.parametrize(("code", "reply", "full"), [
    (552, "5.2.2 Mailbox full", True), (552, "Mailbox full", True),
    (550, "5.2.2 Over quota", True), (552, "5.3.4 Message too big", False),
    (550, "5.1.1 No such user", False)])
def test_a_full_mailbox_is_a_soft_bounce(code, reply, full):
    assert classify(DeliveryError("rcpt", code, reply)).soft_bounce is full


def test_a_bounce_at_the_end_of_data_is_not_read_as_one():
    assert not classify(DeliveryError("data-end", 550, "5.1.1 no such user")).bounce


def test_an_address_that_needs_smtputf8_fails_its_row_only():
    offers = Offers(smtputf8=False, eightbitmime=True, where="the mail server smtp://x:25")
    with pytest.raises(DeliveryError) as refused:
        envelope_lines("news@example.com", "jürgen@exämple.de", offers)
    verdict = classify(refused.value)
    assert verdict.kind == "recipient" and not verdict.bounce
    assert "needs SMTPUTF8" in verdict.said and "smtp://x:25" in verdict.said
    assert next_step(verdict, lambda: 1, pausable=True) == (Step.FAILED, None)


def test_a_sender_that_needs_smtputf8_is_the_channel():
    offers = Offers(smtputf8=False, eightbitmime=True, where="the mail server smtp://x:25")
    with pytest.raises(DeliveryError) as refused:
        envelope_lines("nöws@example.com", "ann@example.com", offers)
    assert classify(refused.value).kind == "channel"


def test_the_envelope_carries_smtputf8_and_the_a_label():
    offered = Offers(smtputf8=True, eightbitmime=True, where="")
    assert envelope_lines("news@example.com", "jürgen@exämple.de", offered) == (
        b"MAIL FROM:<news@example.com> SMTPUTF8 BODY=8BITMIME\r\n",
        "RCPT TO:<jürgen@exämple.de>\r\n".encode())
    assert envelope_lines("news@exämple.de", "ann@exämple.de", offered) == (
        b"MAIL FROM:<news@xn--exmple-cua.de>\r\n", b"RCPT TO:<ann@xn--exmple-cua.de>\r\n")
