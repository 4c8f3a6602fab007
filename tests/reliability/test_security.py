"""Security properties checked against the whole URL map, so a route added tomorrow is covered
without anyone remembering to add it here: login required, CSRF on every state change, bearer
tokens on the API, and the security headers on every page."""

from __future__ import annotations

import io

import pytest
from flask import Flask
from sqlalchemy import func, select
from werkzeug.routing import IntegerConverter, Rule

from broadside.audience.transfer.importer import import_dir, import_path, process, receive_upload
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core import accounts
from broadside.core.models import ApiToken, Broadcast, Event, MailingList, Subscriber, Subscription
from tests.helpers import csrf_token_from, make_list, make_token, start_broadcast
from webapp.extensions import db
from webapp.permissions import public_reason
from webapp.security import is_public_endpoint

pytestmark = pytest.mark.slow

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}

# Pages anyone may reach. A view becomes public only through @public("why"), and says why
# there (webapp/permissions.py: the reason is required); this list makes adding one a reviewed
# decision rather than a decorator nobody notices. Read each one's reason on its view.
REVIEWED_PUBLIC = {
    "static", "auth.login", "auth.logout", "auth.setup", "health.healthz", "health.readyz", "metrics.metrics",
    "signup.join", "signup.join_post", "signup.confirm_page", "signup.confirm",
    "signup.check_inbox",
    "unsubscribe.confirm", "unsubscribe.one_click", "unsubscribe.resubscribe",
    "unsubscribe.preferences", "webhooks.events", "webhooks.ses",
    "unsubscribe.download_data", "unsubscribe.confirm_erase", "unsubscribe.erase",
    "webhooks.postmark", "webhooks.postmark_default", "webhooks.resend",
    "webhooks.resend_default", "webhooks.mailgun", "webhooks.mailgun_default",
    "apidocs.openapi",
    "brand.logo", "brand.theme",
    # The media library's files, by content hash: email clients load them without signing in.
    "media.file",
    "favicon.icon",
    "archive.index", "archive.issue", "archive.feed",
    "archive.view",
    "analytics.pixel", "analytics.click",
    "auth.forgot_password", "auth.reset_sent", "auth.reset_password",
    # The sign-in's second step and the enrolment the owner may require: they answer only a
    # browser holding a pending sign-in (a right password, under five minutes old); any other
    # is sent back to the password. Forms with CSRF tokens, throttled like sign-in.
    "auth.two_factor", "auth.enrol_two_factor",
    # An invitation's page: the emailed single-use link (72 hours, only its SHA-256 stored)
    # is the credential of someone with no account yet; a form with a CSRF token, throttled
    # per client like sign-in.
    "people.accept",
}
# Public POSTs that carry no CSRF token by design, each proving itself another way: its
# credential is named in its @public reason (a signed token, a provider's signature).
CSRF_EXEMPT = {
    "unsubscribe.one_click", "unsubscribe.resubscribe", "unsubscribe.preferences",
    "unsubscribe.download_data", "unsubscribe.erase", "signup.join_post", "signup.confirm",
    "webhooks.events", "webhooks.ses", "webhooks.postmark", "webhooks.postmark_default",
    "webhooks.resend", "webhooks.resend_default", "webhooks.mailgun", "webhooks.mailgun_default",
}
# Documents that are an email, shown in a sandboxed iframe: inline styles are the nature of
# email, so their own CSP allows inline style, but no script at all (default-src 'none').
EMAIL_DOCUMENTS = {"broadcasts.preview_frame", "system.outbox_html", "automations.preview",
                   "settings.design_preview_email", "settings.design_preview_confirmation",
                   "archive.view"}


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Routing and headers do not depend on the database."""
    return request.param


def routes(app: Flask) -> list[tuple[Rule, str]]:
    return sorted(((rule, method) for rule in app.url_map.iter_rules()
                   for method in rule.methods - {"HEAD", "OPTIONS"}),
                  key=lambda pair: (pair[0].rule, pair[1]))


def is_api(rule: Rule) -> bool:
    return rule.endpoint.startswith("api.")


def owner_routes(app: Flask) -> list[tuple[Rule, str]]:
    return [(r, m) for r, m in routes(app) if not is_public_endpoint(app, r.endpoint)]


def url(rule: Rule, ids: dict[str, object] | None = None) -> str:
    values = {}
    for name in rule.arguments:
        numeric = isinstance(rule._converters[name], IntegerConverter)
        values[name] = (ids or {}).get(name, 1 if numeric else "x")
    return rule.build(values, append_unknown=False)[1]


def counts() -> tuple[int, ...]:
    db.session.rollback()
    result = tuple(db.session.scalar(select(func.count()).select_from(m))
                   for m in (Subscriber, Subscription, MailingList, Broadcast, Event, ApiToken))
    db.session.rollback()
    return result


def test_public_pages_are_only_the_reviewed_ones(app):
    public = {r.endpoint for r in app.url_map.iter_rules()
              if is_public_endpoint(app, r.endpoint) and not is_api(r)}
    unreviewed = public - REVIEWED_PUBLIC
    assert not unreviewed, (f"{sorted(unreviewed)} are reachable without signing in; if that is "
                            "right, add them to REVIEWED_PUBLIC with a reason")


def test_every_public_page_says_why_and_the_review_has_no_stale_entry(app):
    endpoints = {r.endpoint for r in app.url_map.iter_rules()}
    stale = sorted(REVIEWED_PUBLIC - endpoints) + sorted(CSRF_EXEMPT - endpoints)
    assert not stale, f"{stale} are reviewed as public but are no route: remove them"
    mute = sorted(e for e in REVIEWED_PUBLIC - {"static"} if len(public_reason(app, e)) < 20)
    assert not mute, f"{mute} must say why anybody may use them: @public(\"why\")"


def test_every_owner_route_refuses_a_visitor_without_a_session_and_changes_nothing(app, client, owner):
    # A visitor holding a valid CSRF token (from the login page), so what refuses them is the
    # login check, not CSRF.
    token = csrf_token_from(client.get("/login").text)
    before = counts()
    checked = 0
    for rule, method in owner_routes(app):
        if is_api(rule):
            continue
        path = url(rule)
        data = {"csrf_token": token} if method in STATE_CHANGING else None
        response = client.open(path, method=method, data=data)
        assert response.status_code == 302, (method, path, response.status_code)
        assert response.location.startswith("/login"), (method, path, response.location)
        htmx = client.open(path, method=method, data=data, headers={"HX-Request": "true"})
        assert htmx.status_code == 401 and htmx.headers["HX-Redirect"] == "/login", (method, path)
        checked += 1
    assert checked >= 30, "the URL map looks too small: is the enumeration broken?"
    assert counts() == before


def test_every_api_route_refuses_missing_wrong_malformed_and_revoked_tokens(app, client, owner):
    revoked, plain_revoked = accounts.create_token(db.session, owner.id, "old")
    accounts.revoke_token(db.session, revoked.id)
    _, plain_valid = accounts.create_token(db.session, owner.id, "valid")
    refusals = {
        "missing": {},
        "wrong": {"Authorization": "Bearer " + "x" * 43},
        "malformed": {"Authorization": plain_valid},  # no scheme
        "other scheme": {"Authorization": f"Basic {plain_valid}"},
        "revoked": {"Authorization": f"Bearer {plain_revoked}"},
        "session cookie only": None,
    }
    before = counts()
    api_routes = [(r, m) for r, m in routes(app) if is_api(r)]
    assert len(api_routes) >= 5
    login = client.get("/login")
    client.post("/login", data={"email": owner.email, "password": "correct horse battery",
                                "csrf_token": csrf_token_from(login.text)})
    for rule, method in api_routes:
        for why, headers in refusals.items():
            response = client.open(url(rule), method=method, headers=headers or {},
                                   json={} if method in STATE_CHANGING else None)
            assert response.status_code == 401, (why, method, rule.rule, response.status_code)
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
            assert response.get_json()["error"]
    assert counts() == before
    # The enumeration does reach the API's own answers with a good token.
    good = client.get("/api/whoami", headers={"Authorization": f"Bearer {plain_valid}"})
    assert good.status_code == 200


def test_csrf_is_enforced_on_every_state_changing_route(app, logged_in_client):
    before = counts()
    checked = 0
    for rule, method in routes(app):
        if method not in STATE_CHANGING or is_api(rule):
            continue
        if rule.endpoint in CSRF_EXEMPT:
            assert is_public_endpoint(app, rule.endpoint), f"{rule.endpoint} is exempt but not public"
            continue
        path = url(rule)
        response = logged_in_client.open(path, method=method, data={"anything": "1"})
        assert response.status_code == 400, (method, path, response.status_code)
        # HTMX requests carry the token in X-CSRFToken; without it, the same refusal.
        htmx = logged_in_client.open(path, method=method, data={}, headers={"HX-Request": "true"})
        assert htmx.status_code == 400, (method, path, htmx.status_code)
        wrong = logged_in_client.open(path, method=method, data={"csrf_token": "forged"})
        assert wrong.status_code == 400, (method, path, wrong.status_code)
        checked += 1
    assert checked >= 15
    assert counts() == before
    # Still signed in: the refused POST /logout did not sign the owner out.
    assert logged_in_client.get("/").status_code == 200


@pytest.fixture
def one_of_everything(app, owner, smtp_server):
    """Real ids for the routes that take one: a list, a person, a draft, a sent broadcast, an
    import, an API token."""
    weekly = make_list(db.session, 3)
    sent = start_broadcast(app, weekly, enqueue=False)
    draft = create_draft(db.session, list_id=weekly.id, subject="Draft", body="Hello")
    person = db.session.scalars(select(Subscriber).order_by(Subscriber.id)).first()
    record = receive_upload(db.session, weekly.id, "p.csv", io.BytesIO(b"email\nzed@example.com\n"),
                            import_dir(app.instance_path), max_bytes=10_000, consent="opted_in")
    process(db.session, record.id, import_path(app.instance_path, record.id))
    token, _ = accounts.create_token(db.session, owner.id, "page")
    return {
        "list_id": weekly.id, "subscriber_id": person.id, "import_id": record.id,
        "token_id": token.id, "filename": "app.css", "name": "missing.eml",
        "token": make_token(person.id, weekly.id, sent.id),
        "broadcast_id": (sent.id, draft.id),
    }


def directives(csp: str) -> dict[str, list[str]]:
    parsed = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            parsed[words[0].lower()] = [w.lower() for w in words[1:]]
    return parsed


def assert_security_headers(endpoint: str, path: str, response) -> None:
    where = f"{endpoint} {path} ({response.status_code})"
    headers = response.headers
    assert headers.get("X-Content-Type-Options") == "nosniff", where
    assert headers.get("Referrer-Policy") in ("same-origin", "no-referrer", "strict-origin"), where
    csp = directives(headers.get("Content-Security-Policy", ""))
    assert csp, f"no Content-Security-Policy on {where}"
    assert csp.get("frame-ancestors") in (["'none'"], ["'self'"]), where
    scripts = csp.get("script-src", csp.get("default-src"))
    assert scripts is not None and "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts, where
    everything = [source for sources in csp.values() for source in sources]
    if "'unsafe-inline'" in everything:
        assert endpoint in EMAIL_DOCUMENTS, f"'unsafe-inline' in the CSP of {where}"
        assert csp["default-src"] == ["'none'"] and "script-src" not in csp, where


def test_security_headers_on_every_page(app, client, logged_in_client, one_of_everything):
    anonymous = app.test_client()
    checked = 0
    for rule, method in routes(app):
        if method != "GET" or is_api(rule):
            continue
        ids = one_of_everything
        variants = ids["broadcast_id"] if "broadcast_id" in rule.arguments else (None,)
        for broadcast_id in variants:
            path = url(rule, {**ids, "broadcast_id": broadcast_id})
            browser = anonymous if is_public_endpoint(app, rule.endpoint) else logged_in_client
            response = browser.get(path)
            assert response.status_code < 500, (path, response.status_code)
            assert_security_headers(rule.endpoint, path, response)
            response.close()
            checked += 1
    assert checked >= 25


def test_an_id_beyond_the_database_range_is_a_404_not_a_500(app, logged_in_client, api_headers):
    anonymous = app.test_client()
    failures = []
    for rule, method in routes(app):
        int_args = [a for a in rule.arguments if isinstance(rule._converters[a], IntegerConverter)]
        if method != "GET" or not int_args:
            continue
        path = url(rule, {a: 2**63 for a in int_args})
        if is_api(rule):
            status = anonymous.get(path, headers=api_headers).status_code
        elif is_public_endpoint(app, rule.endpoint):
            status = anonymous.get(path).status_code
        else:
            status = logged_in_client.get(path).status_code
        if status != 404:
            failures.append((path, status))
    assert not failures, failures
