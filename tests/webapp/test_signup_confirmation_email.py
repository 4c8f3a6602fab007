"""The confirmation email carries no stranger's free text: only the owner's words and the link."""

from __future__ import annotations

from sqlalchemy import select

from broadside.audience import lists as lists
from broadside.core.models import TransactionalMessage
from webapp.extensions import db

PITCH = "Claim your prize at https://evil.example/win now"


def test_a_name_typed_into_the_public_form_is_not_in_the_confirmation_email(client, app):
    weekly = lists.create_list(db.session, "Weekly", "Fridays", signup_enabled=True).id
    response = client.post(f"/join/{weekly}", data={"email": "victim@example.org", "name": PITCH},
                           environ_base={"REMOTE_ADDR": "198.51.100.9"})
    assert response.status_code == 303
    message = db.session.scalar(select(TransactionalMessage))
    assert message.kind == "confirmation"
    for part in (message.subject, message.html, message.text):
        assert "evil.example" not in part and "prize" not in part
    assert message.text.startswith("Hello,\n")
    assert "/join/confirm/" in message.text
