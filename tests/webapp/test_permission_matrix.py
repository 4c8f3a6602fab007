"""The matrix (issue 41 point 2): every route and method of `app.url_map`, asked by each role,
through a signed-in session (pages) and through an API token of that role, full and read-only
(the API). A role whose permissions lack what the route declares (webapp/permissions.py) gets
the refusal, 403 (the error page, for htmx a 403 swapped to the top of #main, for the API a
JSON error), and nothing in the database changed; a role that holds it gets through: not the
route's refusal, not sent to sign in; and a GET changes nothing, whoever asks.

The walk reads the URL map, so a route added tomorrow is in it without anyone listing it. The
requests carry a form (or JSON body) that would change things where a view reads those fields,
so "nothing changed" is asked of requests that would have changed something. Real rows (a list
with people, a draft, a segment, an automation with a step, an import) give the ids; an id of
any other kind is one nobody has (a 404 for those who may). One app and one SQLite database for
each half; the routes that delete come last, so the rows stay for the others.
"""

from __future__ import annotations

import hashlib
import io

import pytest
from flask import Flask
from sqlalchemy import select
from werkzeug.routing import IntegerConverter, Rule

from broadside.audience.transfer.importer import import_dir, import_path, process, receive_upload
from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core import accounts, roles
from broadside.core.models import AutomationStep, Subscriber
from broadside.segments import service as segments
from tests.helpers import make_list
from tests.webapp.role_clients import Fresh, csrf_of, signed_in
from webapp.audit.actions import AUDITED_READS
from webapp.extensions import db
from webapp.permissions import PUBLIC, permission_for

CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
NOBODYS = 999_999  # an id of a kind the matrix seeds none of
# Bookkeeping a refused request may still do: a session noted as used (before the check).
NOT_COMPARED = {"owner_sessions"}
NOT_COMPARED_COLUMNS = {("api_tokens", "last_used_at")}


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """What a role may do does not depend on the database (the proof runs on both:
    tests/webapp/test_permissions.py)."""
    return request.param


@pytest.fixture
def seeded(app, postal_address) -> dict[str, object]:
    weekly = make_list(db.session, 3)
    draft = create_draft(db.session, list_id=weekly.id, subject="Draft", body="Hello")
    person = db.session.scalars(select(Subscriber).order_by(Subscriber.id)).first()
    segment = segments.create_segment(db.session, "Everyone on Weekly", {"all": [
        {"field": "list", "op": "is_on", "value": weekly.id}]})
    automation = automations.create_automation(db.session, automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Hi", "body": "Welcome."}]}),
        default_from=app.config["MAIL_FROM"])
    step = db.session.scalars(select(AutomationStep).where(
        AutomationStep.automation_id == automation.id)).first()
    record = receive_upload(db.session, weekly.id, "p.csv", io.BytesIO(b"email\nzed@example.com\n"),
                            import_dir(app.instance_path), max_bytes=10_000, consent="opted_in")
    process(db.session, record.id, import_path(app.instance_path, record.id))
    assert person is not None and step is not None
    return {"list_id": weekly.id, "subscriber_id": person.id, "broadcast_id": draft.id,
            "segment_id": segment.id, "automation_id": automation.id, "step_id": step.id,
            "import_id": record.id, "which": "unknown", "path": "0", "colour": "336699"}


def url(rule: Rule, ids: dict[str, object]) -> str:
    values = {name: ids.get(name, NOBODYS if isinstance(rule._converters[name], IntegerConverter)
                            else "x") for name in rule.arguments}
    return rule.build(values, append_unknown=False)[1]


def walk(app: Flask, *, api: bool) -> list[tuple[Rule, str, str]]:
    """(rule, method, permission) of every non-public route of one half; deletes last."""
    found = [(rule, method, permission_for(app, rule.endpoint, method) or "undeclared")
             for rule in app.url_map.iter_rules()
             for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"})
             if rule.endpoint.startswith("api.") == api]
    found = [entry for entry in found if entry[2] != PUBLIC]
    return sorted(found, key=lambda e: (e[1] == "DELETE" or "delete" in e[0].rule, e[0].rule, e[1]))


def snapshot() -> dict[str, str]:
    """Every table's rows, as a digest per table (bookkeeping columns left out)."""
    db.session.rollback()
    digests = {}
    for table in db.metadata.sorted_tables:
        if table.name in NOT_COMPARED:
            continue
        columns = [c.name for c in table.columns if (table.name, c.name) not in NOT_COMPARED_COLUMNS]
        rows = db.session.execute(select(*[table.c[name] for name in columns])
                                  .order_by(*table.primary_key.columns)).all()
        digests[table.name] = hashlib.sha256(repr(rows).encode()).hexdigest()
    db.session.rollback()
    return digests


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(name for name in before if before[name] != after.get(name))


def read_changed(rule, before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What a GET changed, but the audit row an export of people's data writes (an act)."""
    return [name for name in changed(before, after)
            if not (name == "audit_log" and rule.endpoint in AUDITED_READS)]


def holders_sentence(permission: str) -> str:
    return ", ".join(roles.LABELS[r].lower() for r in roles.roles_with(permission))


def form(csrf: str, ids: dict[str, object]) -> dict[str, str]:
    """What a form might carry: enough that a view reading it would change something."""
    return {"csrf_token": csrf, "confirm": "yes", "name": "Changed by the matrix",
            "subject": "Changed", "body": "Changed", "email": "matrix@example.com",
            "to_email": "matrix@example.com", "enabled": "1", "published": "1",
            "tracking": "off", "view_link": "on", "per_person": "on", "action": "save",
            "queue_anyway": "y", "audience": f"list:{ids['list_id']}", "list_id": str(ids["list_id"]),
            "sender_name": "Changed", "postal_address": "Changed", "skip_hours": "3",
            "when": "local", "send_at_local": "09:00", "timezone": "Asia/Tokyo"}


def test_every_page_route_refuses_the_roles_it_does_not_name_and_changes_nothing(app, make_person,
                                                                                 seeded):
    clients = {role: signed_in(app, make_person(role)) for role in roles.ROLES}
    csrf = {role: csrf_of(client) for role, client in clients.items()}
    failures: list[str] = []
    checked = 0
    for rule, method, needed in walk(app, api=False):
        path = url(rule, seeded)
        refused = [r for r in roles.ROLES if needed not in roles.permissions_of(r)]
        before = snapshot()
        for role in refused:
            data = form(csrf[role], seeded) if method in CHANGING else None
            plain = clients[role].open(path, method=method, data=data)
            if plain.status_code != 403 or "does not allow this" not in plain.text:
                failures.append(f"{role} {method} {path}: {plain.status_code}, not the refusal")
            htmx = clients[role].open(path, method=method, data=data, headers={"HX-Request": "true"})
            if htmx.status_code != 403 or htmx.headers.get("HX-Retarget") != "#main":
                failures.append(f"{role} {method} {path} (htmx): {htmx.status_code}")
        moved = changed(before, snapshot())
        if moved:
            failures.append(f"{method} {path} refused to {refused} yet changed {moved}")
        before = snapshot()
        # Least first: a writer's save comes before a sender's enable.
        for role in reversed([r for r in roles.ROLES if r not in refused]):
            data = form(csrf[role], seeded) if method in CHANGING else None
            answer = clients[role].open(path, method=method, data=data)
            if answer.status_code == 403 and f"It needs one of: {holders_sentence(needed)}." \
                    in answer.text:
                failures.append(f"{role} {method} {path}: refused though the role holds {needed}")
            elif answer.status_code in (301, 302, 303) and answer.location.startswith("/login"):
                failures.append(f"{role} {method} {path}: sent to sign in")
            elif answer.status_code >= 500:
                failures.append(f"{role} {method} {path}: {answer.status_code}")
        moved = read_changed(rule, before, snapshot()) if method == "GET" else []
        if moved:  # a GET that changes something is a bug whoever asks
            failures.append(f"GET {path} changed {moved}")
        checked += 1
    assert checked > 120, "the walk looks too small"
    assert not failures, "\n".join(failures)
    for role, client in clients.items():  # everyone is still signed in, as who they were
        assert client.get("/").status_code == 200, role


def test_every_api_route_refuses_the_tokens_it_does_not_name_and_changes_nothing(app, make_person,
                                                                               seeded):
    client = Fresh(app)
    tokens: dict[str, tuple[dict[str, str], frozenset[str]]] = {}
    for role in roles.ROLES:
        person = make_person(role)
        for read_only in (False, True):
            _, plain = accounts.create_token(db.session, person.id, f"{role} {read_only}",
                                             read_only=read_only)
            tokens[f"{role}{' read-only' if read_only else ''} token"] = (
                {"Authorization": f"Bearer {plain}"},
                roles.permissions_of(role, token=True, read_only=read_only))
    body = {"name": "Changed by the matrix", "subject": "Changed", "body": "Changed",
            "email": "matrix@example.com", "list_id": seeded["list_id"]}
    failures: list[str] = []
    checked = 0
    for rule, method, needed in walk(app, api=True):
        path = url(rule, seeded)
        json = body if method in ("POST", "PUT", "PATCH") else None
        refused = [name for name, (_, granted) in tokens.items() if needed not in granted]
        before = snapshot()
        for name in refused:
            answer = client.open(path, method=method, headers=tokens[name][0], json=json)
            if answer.status_code != 403 or not (answer.get_json() or {}).get("error"):
                failures.append(f"{name} {method} {path}: {answer.status_code}, not the refusal")
        moved = changed(before, snapshot())
        if moved:
            failures.append(f"{method} {path} refused to {refused} yet changed {moved}")
        allowed = [name for name in tokens if name not in refused]
        before = snapshot()
        for name in sorted(allowed, key=lambda n: len(tokens[n][1])):  # least first
            answer = client.open(path, method=method, headers=tokens[name][0], json=json)
            found = answer.get_json(silent=True)
            error = str(found.get("error", "")) if isinstance(found, dict) else ""
            if answer.status_code == 401 or (answer.status_code == 403 and "may not do this" in error):
                failures.append(f"{name} {method} {path}: {answer.status_code} though it holds {needed}")
            elif answer.status_code >= 500:
                failures.append(f"{name} {method} {path}: {answer.status_code}")
        moved = read_changed(rule, before, snapshot()) if method == "GET" else []
        if moved:
            failures.append(f"GET {path} changed {moved}")
        checked += 1
    assert checked > 50, "the walk looks too small"
    assert not failures, "\n".join(failures)
