"""Every route says who may use it, and the issue's proof (issue 41): a writer, through their
session and through their token, is refused sending, Settings and People, and nothing changes.

The declarations themselves (webapp/permissions.py) are walked here from `app.url_map`; what
each role meets on every route is tests/webapp/test_permission_matrix.py; the role rules finer
than a route (a writer's test sends, automations that are on) are tests/webapp/test_role_rules.py.
"""

from __future__ import annotations

import pytest
from flask import Flask
from sqlalchemy import func, select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core import roles
from broadside.core.models import (
    Broadcast,
    Delivery,
    Identity,
    SiteSettings,
    TransactionalMessage,
    WebhookEndpoint,
)
from tests.helpers import csrf_token_from, make_list
from tests.webapp.role_clients import Fresh, signed_in
from webapp.extensions import db
from webapp.permissions import PUBLIC, allow, permission_for, public, public_reason


def declarations(app: Flask) -> dict[tuple[str, str], str | None]:
    """(endpoint, method) -> what it needs, for every rule and method of the URL map."""
    return {(rule.endpoint, method): permission_for(app, rule.endpoint, method)
            for rule in app.url_map.iter_rules() for method in sorted(rule.methods or ())}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_every_route_and_method_declares_who_may_use_it(app):
    declared = declarations(app)
    assert len(declared) > 200, "the URL map looks too small: is the walk broken?"
    silent = sorted(f"{method} {endpoint}" for (endpoint, method), needed in declared.items()
                    if needed is None)
    assert not silent, ("these routes declare no permission, so they are refused to everyone: "
                        f"add @allow(...) or @public(\"why\") to {silent}")
    unknown = {needed for needed in declared.values()} - {PUBLIC, *roles.PERMISSIONS}
    assert not unknown
    without_reason = sorted(endpoint for (endpoint, _), needed in declared.items()
                            if needed == PUBLIC and endpoint != "static"
                            and len(public_reason(app, endpoint)) < 20)
    assert not without_reason, f"public routes must say why they may be: {without_reason}"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_declarations_follow_the_roles(app):
    """A few that matter most, by name: the walk above proves each says something, this that
    what it says is the issue's."""
    declared = declarations(app)
    expected = {
        ("broadcasts.send", "POST"): roles.SEND, ("api.send", "POST"): roles.SEND,
        ("broadcasts.cancel", "POST"): roles.SEND, ("automations.enable", "POST"): roles.SEND,
        ("api.api_disable_automation", "POST"): roles.SEND,
        ("broadcasts.save", "POST"): roles.WRITE, ("broadcasts.send_test", "POST"): roles.WRITE,
        ("segments.create", "POST"): roles.WRITE, ("automations.edit", "POST"): roles.WRITE,
        ("api.edit_draft", "PATCH"): roles.WRITE, ("api.api_update_segment", "PUT"): roles.WRITE,
        ("settings.update_sender", "POST"): roles.MANAGE, ("lists.create", "POST"): roles.MANAGE,
        ("subscribers.export_csv", "GET"): roles.MANAGE,
        ("subscribers.import_rejections", "GET"): roles.MANAGE,
        ("api.api_erase_subscriber", "DELETE"): roles.MANAGE,
        ("transactional.send_test", "POST"): roles.MANAGE,
        ("broadcasts.edit", "GET"): roles.VIEW, ("api.show", "GET"): roles.VIEW,
        ("auth.login", "POST"): PUBLIC, ("unsubscribe.one_click", "POST"): PUBLIC,
    }
    assert {key: declared[key] for key in expected} == expected


def test_public_needs_its_reason():
    def view():
        return ""
    with pytest.raises(TypeError, match="needs its reason"):
        public(view)  # type: ignore[arg-type]  # the bare form is gone
    with pytest.raises(TypeError):
        public("  ")
    assert public("a reason anybody can read")(view) is view
    with pytest.raises(ValueError, match="unknown permission"):
        allow("everything")


# ---------------------------------------------------------------- the proof: a writer


@pytest.fixture
def draft(app, postal_address):
    weekly = make_list(db.session, 3)
    return create_draft(db.session, list_id=weekly.id, subject="Hello", body="Hi there")


def settings_row() -> tuple:
    db.session.rollback()
    row = db.session.scalars(select(SiteSettings)).first()
    values = tuple(getattr(row, c.key) for c in SiteSettings.__table__.columns) if row else ()
    db.session.rollback()
    return values


def nothing_sent(broadcast_id: int) -> bool:
    db.session.rollback()
    return (db.session.get(Broadcast, broadcast_id).status == "draft"
            and not db.session.scalar(select(func.count()).select_from(Delivery))
            and not db.session.scalar(select(func.count()).select_from(TransactionalMessage)))


def count(model) -> int:
    return db.session.scalar(select(func.count()).select_from(model))


def test_a_writers_session_may_not_send_nor_change_settings_nor_people(app, make_person, draft):
    writer = signed_in(app, make_person(roles.WRITER))
    before = settings_row()
    page = writer.get(f"/broadcasts/{draft.id}/send")  # a writer may look at the send page
    assert page.status_code == 200
    token = csrf_token_from(page.text)

    sent = writer.post(f"/broadcasts/{draft.id}/send", data={"csrf_token": token,
                                                             "queue_anyway": "y"})
    assert sent.status_code == 403 and "does not allow this" in sent.text
    htmx = writer.post(f"/broadcasts/{draft.id}/send", data={"csrf_token": token},
                       headers={"HX-Request": "true"})
    assert htmx.status_code == 403 and htmx.headers["HX-Retarget"] == "#main"
    scheduled = writer.post(f"/broadcasts/{draft.id}/schedule",
                            data={"csrf_token": token, "send_at": "2099-01-01T09:00"})
    assert scheduled.status_code == 403
    assert nothing_sent(draft.id)

    changed = writer.post("/settings/sender", data={
        "csrf_token": token, "sender_name": "Mallory", "sender_email": "m@example.com",
        "postal_address": "Elsewhere", "time_zone": "UTC"})
    assert changed.status_code == 403
    assert writer.post("/settings/defaults", data={"csrf_token": token,
                                                   "skip_hours": "5"}).status_code == 403
    assert settings_row() == before

    if "people.index" in app.view_functions:  # Settings -> People (issue 41's own routes)
        assert writer.get("/settings/people/").status_code == 403
        invited = writer.post("/settings/people/invite", data={"csrf_token": token,
                                                          "email": "x@example.com",
                                                          "role": roles.OWNER})
        assert invited.status_code == 403
    assert nothing_sent(draft.id) and settings_row() == before

    # The same requests from a sender go through: the refusals above were the role's.
    sender = signed_in(app, make_person(roles.SENDER))
    token = csrf_token_from(sender.get(f"/broadcasts/{draft.id}/send").text)
    assert sender.post(f"/broadcasts/{draft.id}/send",
                       data={"csrf_token": token, "queue_anyway": "y"}).status_code == 302
    assert not nothing_sent(draft.id)


def test_a_writers_token_may_not_send_nor_change_settings_nor_people(app, token_headers_as, draft):
    client = Fresh(app)
    writer = token_headers_as(roles.WRITER)
    before = settings_row()
    assert client.get(f"/api/broadcasts/{draft.id}", headers=writer).status_code == 200

    for action in ("send", "pause", "resume", "cancel"):
        refused = client.post(f"/api/broadcasts/{draft.id}/{action}", headers=writer)
        assert refused.status_code == 403, action
        assert "writer" in refused.get_json()["error"]
    assert nothing_sent(draft.id)

    # Settings over the API: its webhooks and its sending identities.
    hook = {"url": "https://93.184.216.34/hooks", "events": ["delivery.sent"]}
    assert client.post("/api/webhooks", headers=writer, json=hook).status_code == 403
    identity = {"name": "Mine", "from": "Me <me@acme.example>", "transport": "smtp://localhost:25",
                "delay_ms": 500, "hourly_limit": 100, "postal_address": ""}
    assert client.post("/api/identities", headers=writer, json=identity).status_code == 403
    assert count(WebhookEndpoint) == 0 and count(Identity) == 0
    assert settings_row() == before

    if "api.api_users" in app.view_functions or any(
            rule.rule.startswith("/api/users") for rule in app.url_map.iter_rules()):
        assert client.get("/api/users", headers=writer).status_code == 403
        invited = client.post("/api/users", headers=writer,
                              json={"email": "x@example.com", "role": roles.OWNER})
        assert invited.status_code == 403
    assert nothing_sent(draft.id) and settings_row() == before

    # A sender's token sends the same draft, and an admin's makes the webhook: the refusals
    # were the role's, not the requests'.
    sender = token_headers_as(roles.SENDER)
    assert client.post(f"/api/broadcasts/{draft.id}/send", headers=sender).status_code == 202
    admin = token_headers_as(roles.ADMIN)
    assert client.post("/api/webhooks", headers=admin, json=hook).status_code == 201
