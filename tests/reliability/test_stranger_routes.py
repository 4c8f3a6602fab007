"""Every route a stranger can reach (the public ones and every webhook, from the app's url_map,
so a route added tomorrow is covered) answers each hostile shape with less than a 500 and no
traceback in the log: deeply nested JSON, NUL, lone surrogates (as UTF-8-invalid bytes and as
JSON \\ud800 escapes) in bodies, forms, query strings and paths, huge numbers, and a Host
header with a label over 63 characters. Bounded: a fixed list of shapes, one request each per
route and method (about 500 requests, a few seconds).

The signed side (what a provider proves and then sends) is fuzzed in test_bad_input.py.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

import pytest
from werkzeug.routing import IntegerConverter, Rule

from tests.helpers import csrf_token_from, make_list
from tests.webapp.test_provider_webhooks import PROVIDERS, make_identity
from webapp.extensions import db
from webapp.security import is_public_endpoint

pytestmark = pytest.mark.slow

DEEP_JSON = b'{"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
SURROGATE_BYTES = b"\xed\xa0\x80"  # "\ud800" written as UTF-8 would write it: not UTF-8
NUMBERS = (b'{"id": 1e999, "list_id": 99999999999999999999999999, "timestamp": -1e400, '
           b'"n": ' + b"9" * 5000 + b', "x": NaN}')
FIELDS = ("email", "name", "q", "password", "password2", "token", "action", "list_id", "id",
          "type", "RecordType", "Type", "message_id")


def _form(value: str) -> dict[str, str]:
    return {field: value for field in FIELDS}


def shapes(csrf: str) -> dict[str, dict]:
    """Each hostile shape as test-client keyword arguments (csrf: a real token, so forms get
    past CSRF to their own parsing)."""
    json = {"Content-Type": "application/json"}
    return {
        "deep JSON": {"data": DEEP_JSON, "headers": json},
        "JSON with NUL escapes": {"data": b'{"email": "a\\u0000@example.com", "id": "\\u0000", '
                                          b'"type": "bounce", "\\u0000": 1}', "headers": json},
        "JSON with lone surrogate escapes": {
            "data": b'{"email": "a\\ud800@example.com", "Type": "\\udfff", "RecordType": '
                    b'"Delivery", "Recipient": "\\ud800"}', "headers": json},
        "JSON with surrogate bytes": {"data": b'{"email": "a' + SURROGATE_BYTES + b'@x.com"}',
                                      "headers": json},
        "huge numbers": {"data": NUMBERS, "headers": json},
        "form with NUL": {"data": {**_form("a\x00@example.com"), "csrf_token": csrf}},
        "form with surrogate bytes": {
            "data": b"csrf_token=" + csrf.encode() + b"&email=a%ED%A0%80%40example.com"
                    b"&name=%ED%A0%80&password=%00&q=%ED%A0%80",
            "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
        "query with NUL and surrogate bytes": {
            "query_string": "q=%00&email=%ED%A0%80&list=%00&page=99999999999999999999"
                            "&after=-1e999&before=%00&status=%00&next=%00"},
        "overlong Host label": {"headers": {"Host": "a" * 64 + ".example.com"}},
        "empty Host label": {"headers": {"Host": "news..example.com"}},
    }


def path_for(rule: Rule, ids: dict[str, int], text: str) -> str:
    values: dict[str, object] = {}
    for name in rule.arguments:
        if isinstance(rule._converters[name], IntegerConverter):
            values[name] = ids.get(name, 1)
        else:
            values[name] = text
    return rule.build(values, append_unknown=False)[1]


def stranger_routes(app) -> list[tuple[Rule, str]]:
    """Every public route and every webhook route (the API answers strangers 401 first; its
    bodies are checked in tests/webapp/test_api_*.py)."""
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("api.") or not is_public_endpoint(app, rule.endpoint):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((rule, method))
    return sorted(found, key=lambda pair: (pair[0].rule, pair[1]))


@pytest.fixture
def strangers_world(app):
    """A list to sign up to, and one identity per provider with a webhook secret, so each
    route reaches its own parsing rather than a 404."""
    app.config.update(WEBHOOK_SECRET="whsec-strangers", SIGNUP_IP_LIMIT=10**6,
                      UNSUBSCRIBE_BAD_TOKEN_LIMIT=10**6, UNSUBSCRIBE_IP_LIMIT=10**6)
    weekly = make_list(db.session, 1)
    ids = {"list_id": weekly.id, "broadcast_id": 1}
    identities = {}
    for scheme, provider in PROVIDERS.items():
        made = provider()
        identities[scheme] = make_identity(scheme, made.transport, made.secret)
    return ids, identities


def test_no_hostile_shape_on_any_stranger_route_is_a_500_or_a_traceback(app, strangers_world,
                                                                       caplog):
    ids, identities = strangers_world
    client = app.test_client()
    csrf = csrf_token_from(client.get("/setup").text)  # no owner yet: the setup form
    failures: list[str] = []
    routes = stranger_routes(app)
    assert len(routes) >= 35, [r.rule for r, _ in routes]
    assert {r.endpoint for r, _ in routes} >= {"webhooks.ses", "webhooks.mailgun",
                                               "webhooks.events", "signup.join_post"}
    for rule, method in routes:
        scheme = rule.endpoint.removeprefix("webhooks.")
        route_ids = {**ids, "identity_id": identities.get(scheme, 1)}
        for name, request in shapes(csrf).items():
            for text in ("x", "x\x00y", "\ud800"):
                if text != "x" and name != "query with NUL and surrogate bytes":
                    continue  # odd path segments once per route, not once per shape
                if not rule.arguments and text != "x":
                    continue
                path = path_for(rule, route_ids, quote(text, safe="", errors="surrogatepass"))
                caplog.clear()
                with caplog.at_level(logging.INFO):
                    try:
                        response = client.open(path, method=method, **request)
                    except Exception as exc:  # the error page itself failed (TESTING raises it)
                        failures.append(f"{method} {rule.rule} {name} {text!r}: raised {exc!r}")
                        continue
                    status = response.status_code
                    response.close()
                bad = [r.getMessage()[:120] for r in caplog.records
                       if r.levelno >= logging.ERROR or r.exc_info]
                if status >= 500 or bad:
                    failures.append(f"{method} {rule.rule} {name} {text!r}: {status} {bad}")
    assert not failures, "\n".join(failures)
