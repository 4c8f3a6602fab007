"""Each sample bounce format read as what it is, naming the message by its VERP token; a
forged token names nothing; the email package reads the ARF report's parts."""

from __future__ import annotations

import email

import pytest

from broadside.feedback.mailbox.reports import read_report
from broadside.mail.verp import Verp
from tests.bounces import EXPECTED, FORMATS, fill

VERP = Verp("a secret key for these tests")
OURS = "<broadside.d1234.b7@news.example.com>"
RCPT = "Grace.Hopper@Example.org"


def _bounce(name: str, verp: str | None = None) -> bytes:
    return fill(name, verp=verp or VERP.address(OURS, "bounces", "example.com") or "",
                rcpt=RCPT, message_id=OURS)


@pytest.mark.parametrize("name", FORMATS)
def test_each_format_reads_as_what_it_is_and_names_the_delivery(name):
    report = read_report(_bounce(name), VERP)
    assert report.kind == EXPECTED[name]
    assert report.rows == [("delivery", 1234)]
    if report.kind is not None:
        assert report.addresses == ["grace.hopper@example.org"]  # lowercased
        assert report.detail
    assert report.message_key.startswith("<") and report.message_key.endswith(">")


def test_the_soft_bounce_says_its_status_and_the_hard_ones_theirs():
    assert read_report(_bounce("soft_mailbox_full.eml"), VERP).detail.startswith("452 4.2.2")
    assert "5.1.1" in read_report(_bounce("postfix_dsn.eml"), VERP).detail
    assert "5.5.0" in read_report(_bounce("outlook_dsn.eml"), VERP).detail


def test_a_dsn_failed_with_a_4xx_status_is_soft():
    raw = _bounce("postfix_dsn.eml").replace(b"Status: 5.1.1", b"Status: 4.2.2")
    assert read_report(raw, VERP).kind == "soft"


def test_a_token_in_capitals_still_verifies():
    verp = (VERP.address(OURS, "bounces", "example.com") or "").upper()
    assert read_report(_bounce("gmail_dsn.eml", verp), VERP).rows == [("delivery", 1234)]


def test_a_forged_token_names_nothing():
    real = VERP.address(OURS, "bounces", "example.com") or ""
    local, _, domain = real.partition("@")
    forged_mark = local[:-1] + ("a" if local[-1] != "a" else "b")
    assert read_report(_bounce("postfix_dsn.eml", f"{forged_mark}@{domain}"), VERP).rows == []
    # Another row's id with this row's mark is no token either.
    other = real.replace("+d1234-", "+d1235-")
    assert read_report(_bounce("postfix_dsn.eml", other), VERP).rows == []
    # Nor is a token made under another key.
    theirs = Verp("someone else's key").address(OURS, "bounces", "example.com") or ""
    assert read_report(_bounce("postfix_dsn.eml", theirs), VERP).rows == []


def test_the_arf_report_parts_read_with_the_email_package():
    message = email.message_from_bytes(_bounce("arf_complaint.eml"))
    assert message.get_content_type() == "multipart/report"
    assert message.get_param("report-type") == "feedback-report"
    [report] = [p for p in message.walk() if p.get_content_type() == "message/feedback-report"]
    fields = report.get_payload()[0]
    assert fields["Feedback-Type"] == "abuse"
    assert fields["Original-Rcpt-To"] == f"<{RCPT}>"


def test_a_message_without_from_does_not_break_the_detectors():
    raw = b"To: someone@example.com\r\nSubject: hello\r\n\r\nnothing to see\r\n"
    report = read_report(raw, VERP)
    assert report.kind is None and report.rows == []
    assert report.message_key.startswith("sha256:")  # no Message-ID: its bytes name it


def test_the_verp_address_is_short_and_lowercase():
    address = VERP.address(OURS, "bounces", "example.com") or ""
    assert address == address.lower()
    assert len(address.partition("@")[0]) <= 64  # an SMTP local part's limit
    assert VERP.address("<someone-else@example.com>", "bounces", "example.com") is None
