"""Each transport says what it is (`shape()`, broadside.delivery.transports), and the engine
picks its way of sending from that once per slice (jobs.engine.sending_for): SMTP that may
pipeline rides, the outbox, SES and Mailgun go one by one, Postmark and Resend in batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from broadside.delivery.eml_folder import OutboxTransport
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.smtp import SmtpTransport
from broadside.delivery.transports import InBatches, OneByOne, Riding
from jobs.batches import BatchSending
from jobs.engine import sending_for
from jobs.one_by_one import OneByOneSending
from jobs.riding import RidingSending


@pytest.mark.parametrize(("url", "shape"), [
    ("smtp://127.0.0.1:2525", Riding),
    ("postmark://token@", InBatches),
    ("resend://key@", InBatches),
    ("ses://key:secret@eu-west-1", OneByOne),
    ("mailgun://api:key@mg.example.com", OneByOne),
    ("", OneByOne),
])
def test_each_transport_says_its_shape_holding_itself(url, shape, tmp_path):
    transport = make_transport(url, str(tmp_path), allow_private=True)
    said = transport.shape()
    assert type(said) is shape and said.transport is transport
    transport.close()


def test_smtp_with_pipelining_turned_off_goes_one_by_one():
    transport = SmtpTransport("smtp://127.0.0.1:2525", pipelining=False)
    assert transport.shape() == OneByOne(transport)


@pytest.mark.parametrize(("url", "way"), [
    ("smtp://127.0.0.1:2525", RidingSending),
    ("postmark://token@", BatchSending),
    ("ses://key:secret@eu-west-1", OneByOneSending),
])
def test_the_engine_sends_the_way_the_shape_says(url, way, tmp_path):
    transport = make_transport(url, str(tmp_path), allow_private=True)
    sending = sending_for(transport.shape(), turn=None)  # no slice needed to choose
    assert type(sending) is way
    assert sending.fields is (way is BatchSending)  # a JSON API gets each message's fields
    transport.close()


def test_the_outbox_writes_one_file_per_message(tmp_path: Path):
    outbox = OutboxTransport(tmp_path)
    assert outbox.shape() == OneByOne(outbox)
    result = outbox.send("a@example.com", "b@example.com", b"Subject: x\r\n\r\nx\r\n")
    assert result.code == 250 and len(list(tmp_path.glob("*.eml"))) == 1
