"""Buttons a role cannot use are not shown: every owner page, as each role sees it, offers only
what that role may do.

For each role, the test signs in through the real form and opens every owner page (the GET
routes of `app.url_map` that are neither public nor the API, their ids filled from a seeded
installation, so a new page is walked without being added here; the few that are not pages
are left out with their reason). On each page it collects every control that would change
something: a form that POSTs (and a button's own `formaction`), every hx-post, hx-put,
hx-patch and hx-delete, and every link to a change page (a page that is a form for one
change: new, edit, delete, send, retry, import, lift, bulk). Each is resolved to its endpoint
by the url_map, and the role must hold the permission that endpoint declares
(`permission_for`, the same reader the check before every request uses). Links and hx-get
URLs must lead to pages the role may at least read. Nothing here names a route's permission:
change a declaration and this test follows it.
"""

from __future__ import annotations

from html.parser import HTMLParser
from itertools import product
from typing import NamedTuple
from urllib.parse import urljoin, urlsplit

import pytest
from flask import Flask
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Rule

from broadside.core import roles
from tests.installation import seed_installation
from webapp.permissions import PUBLIC, is_public, permission_for

# Route arguments, by name: the seeded rows that fill them (a name with several is walked once
# with each: a broadcast draft, scheduled and sent; an automation on and off).
ARGUMENTS = {"broadcast_id": ("draft", "scheduled", "sent"),
             "automation_id": ("automation_on", "automation_off")}
LITERALS = {"which": ("unknown", "transient"), "ref": ("builtin:newsletter",)}
# An argument that belongs to another's row: a delivery and a retry are the sent broadcast's, a
# step the enabled automation's.
BELONGS = {"delivery_id": ("broadcast_id", "sent"), "which": ("broadcast_id", "sent"),
           "step_id": ("automation_id", "automation_on")}
# Pages that need a question in their query string: the bulk action's confirmation.
QUERIES = {"subscribers.bulk_confirm": "?action=add&target={list_id}&scope=all"}
# GET routes that are not pages a person reads, and so carry no control.
NOT_PAGES = {
    "broadcasts.preview_frame": "the email itself, inside the page's iframe",
    "automations.preview": "a step's email, inside the editor's iframe",
    "transactional.preview_email": "a template's email, inside its page's iframe",
    "library.preview": "a template's email, inside the templates page's iframe",
    "settings.design_preview_email": "the design's email, inside an iframe",
    "settings.design_preview_confirmation": "the design's sign-up page, inside an iframe",
    "system.outbox_html": "an outbox message's HTML, inside an iframe",
    "subscribers.export_csv": "a CSV download",
    "subscribers.import_rejections": "a CSV download",
    "broadcasts.test_status": "one test send's status line (htmx), polled until it settles",
    "system.outbox_message": "exists only with the file outbox transport, not used here",
    "subscribers.bulk_status": "a bulk action's progress, seeded nowhere here",
    "subscribers.bulk_progress": "a bulk action's progress, seeded nowhere here",
    "subscribers.import_status": "an import's progress, seeded nowhere here",
    "subscribers.import_progress": "an import's progress, seeded nowhere here",
}
# A link leads to a change page when its route answers POST too and its last word says what
# the page is for. Editors (a draft's, a segment's, an automation's) are where those are read
# as well: every role opens them, and their forms are checked like every other form.
CHANGE_WORDS = {"new", "edit", "delete", "send", "retry", "import", "lift", "bulk"}
READ_AND_CHANGE = {"broadcasts.edit", "segments.edit", "automations.edit"}


class Control(NamedTuple):
    method: str
    url: str
    what: str  # how the page offers it, for the failure message


class Controls(HTMLParser):
    """Every form, htmx request and link of one page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Control] = []
        self.links: list[str] = []
        self.gets: list[str] = []
        self._form: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for verb in ("post", "put", "patch", "delete"):
            if f"hx-{verb}" in a:
                self.found.append(Control(verb.upper(), a[f"hx-{verb}"], f"<{tag} hx-{verb}>"))
        if "hx-get" in a:
            self.gets.append(a["hx-get"])
        if tag == "form":
            self._form = a
            if a.get("method", "get").lower() == "post":
                self.found.append(Control("POST", a.get("action", ""), "<form method=post>"))
            elif a.get("action"):
                self.links.append(a["action"])  # a GET form leads to a page, as a link does
        if tag in ("button", "input") and "formaction" in a:
            method = a.get("formmethod") or (self._form or {}).get("method", "get")
            if method.lower() == "post":
                self.found.append(Control("POST", a["formaction"], f"<{tag} formaction>"))
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None


def owner_pages(app: Flask) -> list[Rule]:
    return sorted((rule for rule in app.url_map.iter_rules()
                   if "GET" in (rule.methods or ()) and not rule.rule.startswith("/api")
                   and not is_public(app, rule.endpoint) and rule.endpoint not in NOT_PAGES),
                  key=lambda rule: rule.rule)


def urls_of(rule: Rule, seed: dict[str, int]) -> list[str]:
    choices = []
    owned = dict(BELONGS[name] for name in rule.arguments if name in BELONGS)
    for name in sorted(rule.arguments):
        if name in owned:
            choices.append([(name, seed[owned[name]])])
        elif name in LITERALS:
            choices.append([(name, value) for value in LITERALS[name]])
        else:
            choices.append([(name, seed[key]) for key in ARGUMENTS.get(name, (name,))])
    query = QUERIES.get(rule.endpoint, "").format(**seed)
    return [rule.build(dict(combination), append_unknown=False)[1] + query  # type: ignore[index]
            for combination in product(*choices)]


def internal_path(page: str, url: str) -> str | None:
    """The path a URL on `page` leads to, when it is one of ours (not an anchor, not mailto)."""
    if url.startswith("#"):
        return None
    parts = urlsplit(urljoin("http://localhost" + page, url))
    if parts.scheme not in ("http", "https") or parts.netloc != "localhost":
        return None
    return parts.path


def endpoint_of(app: Flask, path: str, method: str) -> str | None:
    try:
        endpoint, _ = app.url_map.bind("localhost").match(path, method=method)
    except HTTPException:
        return None
    return str(endpoint)


def is_change_page(app: Flask, path: str, endpoint: str) -> bool:
    if endpoint in READ_AND_CHANGE or endpoint_of(app, path, "POST") is None:
        return False
    words = [w for w in path.strip("/").split("/") if not w.isdigit()]
    return bool(words) and (words[-1] in CHANGE_WORDS or words[-2:-1] == ["retry"])


def refusals(app: Flask, role: str, page: str, html: str) -> list[str]:
    """What `page` offers that `role` may not do."""
    held = roles.permissions_of(role) | {PUBLIC}
    parser = Controls()
    parser.feed(html)
    wrong = []
    for control in parser.found:
        path = internal_path(page, control.url or page)
        if path is None:
            continue
        endpoint = endpoint_of(app, path, control.method)
        needed = permission_for(app, endpoint, control.method)
        if needed not in held:
            wrong.append(f"{control.what} {control.method} {path} ({endpoint}) needs {needed}")
    for url in parser.links + parser.gets:
        path = internal_path(page, url)
        endpoint = endpoint_of(app, path, "GET") if path else None
        if path is None or endpoint is None:
            continue
        needed = permission_for(app, endpoint, "GET")
        if needed not in held:
            wrong.append(f"a link to {path} ({endpoint}) needs {needed}")
        elif is_change_page(app, path, endpoint):
            change = endpoint_of(app, path, "POST")
            needed = permission_for(app, change, "POST")
            if needed not in held:
                wrong.append(f"a link to the change page {path} ({change}) needs {needed}")
    return wrong


@pytest.fixture
def installation(app, run_worker_burst) -> dict[str, int]:
    return seed_installation(app, run_worker_burst)


@pytest.mark.parametrize("role", roles.ROLES)
def test_every_owner_page_offers_only_what_the_role_may_do(app, installation, sign_in_as, role):
    client = sign_in_as(role)
    walked, wrong = 0, []
    for rule in owner_pages(app):
        for url in urls_of(rule, installation):
            response = client.get(url, follow_redirects=True)
            if response.status_code == 403:
                continue  # the role may not read it: nothing on it to press
            assert response.status_code == 200, f"{role}: GET {url} answered {response.status_code}"
            walked += 1
            final = response.request.path
            wrong += [f"{url}: {problem}" for problem in refusals(app, role, final, response.text)]
    assert walked > 60, f"{role} saw only {walked} pages: is the seed missing?"
    assert wrong == [], f"{role} is offered what it may not do:\n" + "\n".join(sorted(set(wrong)))


def test_the_walk_sees_a_hidden_button(app):
    """The parser and the resolution catch a control the role may not use (a walk that finds
    nothing proves nothing unless it could have)."""
    html = ('<form method="post" action="/lists/"></form><button hx-post="/broadcasts/1/pause">'
            '</button><a href="/subscribers/new">Add</a><a href="/subscribers/">All</a>')
    found = refusals(app, roles.VIEWER, "/", html)
    assert [f.split(" (")[0] for f in found] == [
        "<form method=post> POST /lists/", "<button hx-post> POST /broadcasts/1/pause",
        "a link to the change page /subscribers/new"]
    assert refusals(app, roles.OWNER, "/", html) == []


def test_the_words_for_who_may_follow_the_roles_table(app):
    """templates/_roles.html names who holds each permission; it must say what roles.py says."""
    words = app.jinja_env.get_template("_roles.html").module
    for permission in ("write", "send", "manage", "people"):
        names = [roles.LABELS[role].lower() + "s" for role in roles.roles_with(permission)]
        said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        assert str(words.who(permission)) == said, permission
