"""One rule for text no column can store: a NUL character or a lone surrogate in any string a
request carries is a 422 naming the field, and nothing is written. PostgreSQL answered 500
(`psycopg.DataError`) for a NUL in a list's name or description, a broadcast's subject, body
or preheader, a segment's name; each field had its own check or none.

The cases are enumerated, not listed: every string property of every request body the OpenAPI
document describes (nested ones by their path, `steps[0].body`, `rules.all[0].value`), every
string query parameter it describes, and every route of `app.url_map` outside the API and the
webhooks (a form field on each POST route, a query parameter on each GET route), so a field
or a route added tomorrow is covered without anyone remembering. Bounded: one request per
case, a few hundred in all, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Iterator
from typing import Any

import pytest
from flask import g
from jsonschema import Draft202012Validator
from sqlalchemy import select
from werkzeug.routing import IntegerConverter, Rule

from broadside.core.json_input import unstorable, unstorable_at
from tests.helpers import csrf_token_from
from webapp.extensions import db
from webapp.security import is_public_endpoint

BAD = {"NUL": "a\x00b", "lone surrogate": "a\ud800b"}
KEY = object()  # a place in a free-form object where the bad text is the key, not the value
WRITTEN_ON_EVERY_REQUEST = {"api_tokens", "owner_sessions"}  # last-used stamps
METHODS = ("get", "post", "put", "patch", "delete")


# ------------------------------------------------------------------ the document's text fields

def _is_text(schema: dict[str, Any]) -> bool:
    types = schema.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    enum = schema.get("enum")
    return ("string" in types or isinstance(schema.get("const"), str)
            or bool(enum and all(isinstance(v, str) for v in enum)))


def text_places(doc: dict[str, Any], schema: dict[str, Any], path: tuple = (),
                refs: frozenset[str] = frozenset()) -> Iterator[tuple]:
    """Every place in a body of `schema` that holds text: a path of keys and list indexes."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        if name in refs:
            return  # a group inside a group: its places are the outer one's again
        refs, schema = refs | {name}, doc["components"]["schemas"][name]
    for alternatives in ("oneOf", "anyOf", "allOf"):
        for alternative in schema.get(alternatives, []):
            yield from text_places(doc, alternative, path, refs)
    if _is_text(schema):
        yield path
    if "properties" in schema:
        for name, sub in schema["properties"].items():
            if "contentMediaType" not in sub:  # an uploaded file is not text we store
                yield from text_places(doc, sub, (*path, name), refs)
    elif schema.get("type") == "object" and schema.get("additionalProperties") is not False:
        yield (*path, "note")  # free-form (attributes): a value, and a key
        yield (*path, KEY)
    if "items" in schema:
        yield from text_places(doc, schema["items"], (*path, 0), refs)


def shown(path: tuple, text: str) -> str:
    """The path as the API names it: `steps[0].body`; a bad key escaped."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            name = ascii(f"no{text}te")[1:-1] if step is KEY else step
            out += f".{name}" if out else name
    return out


def place(body: Any, path: tuple, text: str) -> Any:
    """A copy of `body` with `text` at `path` (containers made on the way as needed)."""
    body = copy.deepcopy(body)
    node = body
    for step, following in zip(path, path[1:], strict=False):
        kind = list if isinstance(following, int) else dict
        if isinstance(step, int):
            while len(node) <= step:
                node.append(kind())
            if not isinstance(node[step], kind):
                node[step] = kind()
        elif not isinstance(node.get(step), kind):
            node[step] = kind()
        if following is KEY:
            node[step][f"no{text}te"] = "x"
            return body
        node = node[step]
    if isinstance(path[-1], int):
        del node[path[-1]:]
        node.append(text)
    else:
        node[path[-1]] = text
    return body


def everything() -> dict[str, list]:
    """Every row of every table a refused request must leave alone."""
    db.session.rollback()
    return {name: sorted(map(repr, db.session.execute(select(table)).all()))
            for name, table in db.metadata.tables.items() if name not in WRITTEN_ON_EVERY_REQUEST}


def changed(before: dict[str, list]) -> list[str]:
    after = everything()
    return [name for name in before if before[name] != after[name]]


# ------------------------------------------------------------------ something of everything

@pytest.fixture
def seeded(app, client, api_headers, owner, postal_address) -> dict[str, int]:
    """One of everything the body-taking operations name in their paths, made through the API
    with valid bodies, so each request with bad text reaches the field rule rather than a 404."""
    def made(path: str, body: dict) -> int:
        answer = client.post(path, headers=api_headers, json=body)
        assert answer.status_code in (200, 201, 202), (path, answer.json)
        return answer.json["id"]

    ids = {"list_id": made("/api/lists", {"name": "Weekly", "description": "Each Friday"})}
    ids["subscriber_id"] = made("/api/subscribers", {"email": "ann@example.com", "name": "Ann",
                                                     "lists": [ids["list_id"]]})
    ids["segment_id"] = made("/api/segments", {"name": "Berlin", "rules": {"all": [
        {"field": "attributes.city", "op": "equals", "value": "Berlin"}]}})
    ids["identity_id"] = made("/api/identities", {"name": "Product", "transport": "outbox://",
                                                  "from": "Acme <news@acme.example>"})
    ids["broadcast_id"] = made("/api/broadcasts", {"subject": "Hi", "body": "Hello",
                                                   "list_id": ids["list_id"]})
    ids["automation_id"] = made("/api/automations", {
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": ids["list_id"]},
        "steps": [{"subject": "Welcome", "body": "Glad you came."}]})
    ids["template_id"] = made("/api/transactional/templates", {
        "name": "Password reset", "subject": "Reset", "body": "Your link: {{ data.link }}"})
    ids["message_id"] = made("/api/transactional", {"template": "Password reset",
                                                    "to": "ann@example.com", "data": {}})
    ids["user_id"] = owner.id
    ids["invitation_id"] = made("/api/users", {"email": "bo@example.com", "role": "viewer"})
    # What the token may do was kept in this (the test's) app context's `g`; a browser's
    # request has a context of its own.
    g.pop("broadside_granted", None)
    return ids


def valid(example: Any, ids: dict[str, int]) -> Any:
    """The document's example with its ids pointing at what `seeded` made."""
    if isinstance(example, dict):
        return {key: (ids[key] if key in ids and isinstance(value, int)
                      else [ids["list_id"]] if key == "lists" else valid(value, ids))
                for key, value in example.items()}
    if isinstance(example, list):
        return [valid(item, ids) for item in example]
    return example


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def api_cases(doc: dict[str, Any], ids: dict[str, int]) -> list[tuple[str, str, str, dict]]:
    """(method, path, the field's name, how to send it: test-client keyword arguments).
    A lone surrogate only in JSON (`\\ud800`): a form or a query string cannot carry one."""
    cases = []
    nul = BAD["NUL"]
    for method, path, operation in operations(doc):
        content = operation.get("requestBody", {}).get("content", {})
        if "application/json" in content:
            media = content["application/json"]
            example = valid(media.get("example", {}), ids)
            for where in dict.fromkeys(text_places(doc, media["schema"])):
                for text in BAD.values():
                    cases.append((method, path, shown(where, text),
                                  {"json": place(example, where, text)}))
        if "multipart/form-data" in content:
            schema = content["multipart/form-data"]["schema"]
            for where in dict.fromkeys(text_places(doc, schema)):
                cases.append((method, path, where[0], {"data": {
                    where[0]: nul, "file": (io.BytesIO(b"email\nbo@example.com\n"), "a.csv")}}))
            for name, sub in schema["properties"].items():  # a file's contents are its own,
                if "contentMediaType" in sub:  # but its name is text an import stores
                    cases.append((method, path, name, {"data": {
                        name: (io.BytesIO(b"email\nbo@example.com\n"), f"people{nul}.csv")}}))
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query" and _is_text(parameter["schema"]):
                cases.append((method, path, parameter["name"],
                              {"query_string": {parameter["name"]: nul}}))
    return cases


def test_every_text_field_the_api_documents_refuses_nul_and_lone_surrogates_by_name(
        client, api_headers, seeded):
    doc = client.get("/api/openapi.json").json
    error_schema = Draft202012Validator(doc["components"]["schemas"]["Error"])
    cases = api_cases(doc, seeded)
    named = {(method, path, field) for method, path, field, _ in cases}
    # The walk finds what the issue named, nested places, query parameters and form fields.
    assert {("POST", "/api/lists", "name"), ("POST", "/api/lists", "description"),
            ("POST", "/api/broadcasts", "preheader"),
            ("PATCH", "/api/broadcasts/{broadcast_id}", "body"),
            ("POST", "/api/segments", "name"), ("PUT", "/api/segments/{segment_id}",
                                                 "rules.all[0].value"),
            ("POST", "/api/automations", "steps[0].body"),
            ("PATCH", "/api/subscribers/{subscriber_id}", "attributes.note"),
            ("GET", "/api/subscribers", "q"),
            ("POST", "/api/lists/{list_id}/import", "consent"),
            ("POST", "/api/lists/{list_id}/import", "file")} <= named, sorted(named)
    before = everything()
    failures = []
    for method, path, field, send in cases:
        db.session.rollback()  # each request its own transaction, as when served
        answer = client.open(path.format(**seeded), method=method, headers=api_headers, **send)
        body = answer.get_json(silent=True) or {}
        if (answer.status_code != 422 or body.get("field") != field
                or field.replace("\\", "") not in body.get("error", "").replace("\\", "")
                or list(error_schema.iter_errors(body))):
            failures.append(f"{method} {path} {field!r}: {answer.status_code} {body}")
    assert not failures, f"{len(failures)} of {len(cases)}:\n" + "\n".join(failures)
    assert changed(before) == []


# ------------------------------------------------------------------ every page, form and route

def route_path(rule: Rule, ids: dict[str, int]) -> str:
    values = {name: ids.get(name, 1) if isinstance(rule._converters[name], IntegerConverter)
              else "x" for name in rule.arguments}
    return rule.build(values, append_unknown=False)[1]


def page_routes(app) -> list[tuple[Rule, str]]:
    """Every route but the API's (above: JSON under /api/) and the webhooks' (which refuse
    a provider's event per field, 400)."""
    return sorted(((rule, method) for rule in app.url_map.iter_rules()
                   if not rule.rule.startswith(("/api/", "/webhooks/"))
                   for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"})),
                  key=lambda pair: (pair[0].rule, pair[1]))


def test_every_form_and_address_of_every_page_refuses_a_nul_naming_the_field(
        app, logged_in_client, seeded):
    client = logged_in_client
    token = csrf_token_from(client.get("/lists/").text)
    routes = page_routes(app)
    posts = {rule.endpoint for rule, method in routes if method == "POST"}
    assert {"lists.create", "lists.update", "broadcasts.autosave", "segments.create",
            "signup.join_post", "unsubscribe.preferences"} <= posts
    before = everything()
    failures, sent = [], 0
    for rule, method in routes:
        url = route_path(rule, seeded)
        public = is_public_endpoint(app, rule.endpoint)
        if method == "GET":
            tries = [("“search” in the address", {"query_string": {"q": BAD["NUL"]}})]
        else:
            upload = (io.BytesIO(b"email\n"), f"people{BAD['NUL']}.csv")
            tries = [("“name” field", {"data": {"csrf_token": token, "name": BAD["NUL"]}}),
                     ("name of the file chosen for “upload”",
                      {"data": {"csrf_token": token, "upload": upload}})]
            if not public:
                tries.append(("“name” field", {"data": {"csrf_token": token, "name": BAD["NUL"]},
                                               "headers": {"HX-Request": "true"}}))
        for said, send in tries:
            sent += 1
            answer = client.open(url, method=method, **send)
            text = answer.get_data().decode(errors="replace")  # a refused icon is text too
            htmx = "headers" in send
            if (answer.status_code != 422 or f"The {said} holds a NUL character" not in text
                    or "nothing was" not in text
                    or htmx != ("<html" not in text)
                    or htmx and answer.headers.get("HX-Retarget") != "#main"):
                failures.append(f"{method} {rule.rule} {'htmx' if htmx else ''}: "
                                f"{answer.status_code} {text[:160]!r}")
    assert not failures, f"{len(failures)} of {sent} requests:\n" + "\n".join(failures)
    assert changed(before) == []


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_nul_in_a_path_segment_a_parameters_name_or_its_second_value_is_refused_too(logged_in_client):
    outbox = logged_in_client.get("/system/outbox/abc%00def")
    assert outbox.status_code == 422 and "“name” in the address" in outbox.text
    # A signed token is its own view's to judge: it says the link is broken and what to do.
    unsubscribe = logged_in_client.get("/u/abc%00def")
    assert unsubscribe.status_code == 400 and "“token”" not in unsubscribe.text
    named = logged_in_client.get("/subscribers/?se%00arch=x")
    assert named.status_code == 422 and "“se\\x00arch”" in named.text
    second = logged_in_client.get("/subscribers/?q=fine&q=a%00b")  # not only the first value
    assert second.status_code == 422 and "“search” in the address holds a NUL" in second.text


def test_the_api_checks_the_token_before_the_text(client, api_headers, seeded):
    """A stranger without a token hears 401, whatever the query holds."""
    assert client.get("/api/subscribers?q=a%00b").status_code == 401
    answer = client.get("/api/subscribers?q=a%00b", headers=api_headers)
    assert answer.status_code == 422 and answer.json["field"] == "q"


def test_the_people_search_and_the_deliveries_search_answer_alike(logged_in_client, seeded):
    """Both searches refuse a NUL with a 422 that says so (the people search dropped it
    silently, the deliveries search refused it in its own words)."""
    people = logged_in_client.get("/subscribers/?q=ann%00")
    deliveries = logged_in_client.get(f"/broadcasts/{seeded['broadcast_id']}/deliveries?q=ann%00")
    for answer in (people, deliveries):
        assert answer.status_code == 422
        assert "The “search” in the address holds a NUL character" in answer.text


# ------------------------------------------------------------------ the pieces

def test_which_text_no_column_stores():
    assert not unstorable("Grüße, 👋 — \t\n")
    assert unstorable("a\x00") and unstorable("\ud800") and unstorable("x\udfffy")
    assert unstorable_at({"steps": [{"body": "ok"}, {"body": "b\x00d"}]}) == "steps[1].body"
    assert unstorable_at({"attributes": {"ci\x00ty": "Bern"}}) == "attributes.ci\\x00ty"
    assert unstorable_at({"fine": ["a", {"b": 1.5}]}) is None


def test_the_walk_places_bad_text_where_the_schema_says():
    assert place({"steps": [{"body": "x"}]}, ("steps", 0, "subject"), "!") == {
        "steps": [{"body": "x", "subject": "!"}]}
    assert place({}, ("attributes", KEY), "\x00") == {"attributes": {"no\x00te": "x"}}
    assert place({"events": ["a", "b"]}, ("events", 0), "!") == {"events": ["!"]}
    assert shown(("rules", "all", 0, "value"), "\x00") == "rules.all[0].value"
    assert shown(("attributes", KEY), "\x00") == "attributes.no\\x00te"


@pytest.fixture
def small_imports(app_config):
    app_config["MAX_IMPORT_BYTES"] = 1000  # and so MAX_CONTENT_LENGTH, 64 KB above it


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_body_past_the_size_limit_is_left_to_the_view_that_reads_it(small_imports, client,
                                                                      api_headers):
    """The rule reads no form a request is too large to send: the import still says which
    limit it passed (the rule reading it first answered the generic 413)."""
    weekly = client.post("/api/lists", headers=api_headers, json={"name": "Weekly"}).json["id"]
    huge = b"email\n" + b"p@example.com\n" * 6000  # 84 KB
    answer = client.post(f"/api/lists/{weekly}/import", headers=api_headers,
                         data={"file": (io.BytesIO(huge), "people.csv"), "consent": "a\x00b"})
    assert answer.status_code == 413 and "larger than the import limit" in answer.json["error"]
