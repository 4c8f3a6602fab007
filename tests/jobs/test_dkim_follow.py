"""Turning DKIM on, or changing its key, reaches an identity's running stream at the next
maintenance tick (jobs.supervisor: DKIM is among the values a stream is built from), through a
real worker process, a real SMTP server and Redis: the test send before is unsigned, the one
after verifies with dkimpy against the new key."""

from __future__ import annotations

import dkim
import pytest

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.models import Identity
from broadside.mail import dkim_keys
from tests.helpers import make_identity, make_list, wait_until
from webapp.extensions import db

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """A process and its leases; the identity's reads are the service's (both databases in
    tests/webapp/test_dkim_identities.py)."""
    return request.param


def _test_send(client, api_headers, broadcast_id: int, to: str) -> None:
    answer = client.post(f"/api/broadcasts/{broadcast_id}/test", headers=api_headers, json={"email": to})
    assert answer.status_code == 202, answer.text


def test_dkim_turned_on_signs_the_next_message_of_the_running_stream(
        app, client, api_headers, smtp_server, second_server, worker_factory):
    product = make_identity("Product", second_server.url, delay_ms=0, email="product@product.example")
    users = make_list(db.session, 1, "Users", domain="users.example")
    draft = create_draft(db.session, list_id=users.id, subject="Hi", body="Hello", identity_id=product.id)
    worker = worker_factory()
    wait_until(lambda: worker.output.count("lease taken") == 2, timeout=30, message=lambda: worker.output)
    _test_send(client, api_headers, draft.id, "first@example.com")
    wait_until(lambda: len(second_server.messages) == 1, timeout=30, message=lambda: worker.output)
    assert b"DKIM-Signature" not in second_server.messages[0].data

    changed = client.put(f"/api/identities/{product.id}", headers=api_headers, json={
        "name": "Product", "from": "Product <product@product.example>", "delay_ms": 0,
        "dkim": {"selector": "s1", "private_key": "generate"}})
    assert changed.status_code == 200, changed.text
    wait_until(lambda: worker.output.count("lease taken") == 3, timeout=30, message=lambda: worker.output)
    _test_send(client, api_headers, draft.id, "second@example.com")
    wait_until(lambda: len(second_server.messages) == 2, timeout=30, message=lambda: worker.output)
    db.session.expire_all()
    record = dkim_keys.txt_record(db.session.get(Identity, product.id).dkim_private_key).encode()

    def lookup(name: bytes, timeout: float = 5) -> bytes:
        return record if name.rstrip(b".") == b"s1._domainkey.product.example" else b""

    assert dkim.verify(second_server.messages[1].data, dnsfunc=lookup)
