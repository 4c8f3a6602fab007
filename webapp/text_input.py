"""One rule for the text every request brings: no NUL character and no lone surrogate in any
form field, query parameter or path segment (name or value; a signed token's segment is its
view's to judge) or uploaded file's name, checked
before any view runs, so a field added tomorrow cannot forget it.

PostgreSQL refuses a NUL in text (a list's name, a broadcast's subject: a 500 from
`psycopg.DataError` when the write came), and no driver encodes a lone surrogate; a search
for one can match nothing. The refusal is a 422 naming the field, and nothing was written:

- the API (`/api/...`): the JSON error shape with `field` (`{"error": ..., "field": "q"}`),
  after the bearer token is checked (webapp/api/__init__.py runs `refuse_unstorable_text`
  after `authenticate_bearer`; its JSON bodies are checked by `json_body`, with the path of
  the field, `steps[2].body`);
- a page (an owner's, or a public one: sign-up, unsubscribe, archive): the error page, the
  reason naming the field; to htmx, the reason alone as a fragment, aimed at the top of the
  page (`HX-Retarget: #main`), never at the part the request would have replaced (htmx
  swaps a 4xx only where a page asks it to, as the broadcast editor's autosave does);
- webhooks (`/webhooks/...`) are left to broadside/feedback, which refuses a provider's
  event field by field with a 400 in its own words; an address no route matches stays a 404.

Lone surrogates cannot arrive through a form or a query string (werkzeug keeps an invalid
UTF-8 escape such as %ED%A0%80 as the literal text, and a multipart field's invalid bytes
become U+FFFD), only through a JSON escape (`\\ud800`); the check is the same for both.
An uploaded file's contents are not text fields (an import reads its file's bytes itself),
but its file name is (an import stores it). A body larger than the server accepts is not read
here: the view that reads it says which limit it passed.
"""

from __future__ import annotations

from collections.abc import Iterable

from flask import Flask, Response, current_app
from markupsafe import escape

from broadside.core.errors import ValidationError
from broadside.core.i18n import _, _l
from broadside.core.json_input import unstorable
from webapp.htmx import make_response, request

# Blueprints that answer for their own input: providers' webhooks refuse per field (400).
EXEMPT_BLUEPRINTS = frozenset({"webhooks"})
# Path segments that are signed tokens, verified by their views (unsubscribe, confirmation,
# password reset, view in browser, tracking): see `unstorable_input`.
SIGNED = frozenset({"token"})
# What an owner calls a parameter when it is not what the page labels it.
_OWNER_NAMES = {"q": _l("search")}


def _first_unstorable(pairs: Iterable[tuple[str, object]]) -> tuple[str, str] | None:
    """(name, the text that cannot be stored: the name itself or its value) of the first
    pair holding some; None when every one can be stored."""
    for name, value in pairs:
        if unstorable(name):
            return name, name
        if isinstance(value, str) and unstorable(value):
            return name, value
    return None


def unstorable_input() -> tuple[str, str, str] | None:
    """(where, name, the offending text) of the first query parameter, path segment or form
    field that cannot be stored; None when every one can."""
    places: list[tuple[str, Iterable[tuple[str, object]]]] = [
        ("query", request.args.items(multi=True)),
        # A signed token in the path is never stored: its own view says the link is broken
        # and what to do (ask for a new one), which a generic refusal would not.
        ("path", ((k, v) for k, v in (request.view_args or {}).items() if k not in SIGNED)),
    ]
    # A body larger than the server takes is never read here: the view that would read it
    # says which limit it passed (an import: its own), rather than a 413 raised from here.
    limit = request.max_content_length
    view = current_app.view_functions.get(request.endpoint or "")
    if getattr(view, "reads_own_body", False):
        pass  # it streams its multipart body itself and checks its parts (`refuse_in_parts`)
    elif not (limit and request.content_length and request.content_length > limit):
        places.append(("form", request.form.items(multi=True)))
        # An upload's contents are the view's to read; its file name is text that is stored.
        places.append(("file", ((name, upload.filename)
                                for name, upload in request.files.items(multi=True))))
    for where, pairs in places:
        found = _first_unstorable(pairs)
        if found is not None:
            return where, *found
    return None


def reads_own_body(view):
    """Mark a view that reads its multipart body itself, as a stream (the API's import): the
    rule leaves `request.form` unread for it (reading it would consume the stream), and the
    view's reader applies `refuse_in_parts` to the parts it kept."""
    view.reads_own_body = True
    return view


def refuse_in_parts(fields: Iterable[tuple[str, str]], filename: tuple[str, str] | None) -> None:
    """The rule for a body read by its view: its text parts, and (name, filename) of its file."""
    for where, pairs in (("form", fields), ("file", [filename] if filename else [])):
        found = _first_unstorable(pairs)
        if found is not None:
            raise ValidationError(_api_message(where, *found), field=_shown(found[0]))


def _shown(name: str) -> str:
    """A name as a message may print it (itself, or escaped where it is the bad part)."""
    return name if name.isprintable() and not unstorable(name) else ascii(name)[1:-1]


def _api_message(where: str, name: str, bad: str) -> str:
    kind = {"query": "query parameter", "path": "path segment", "form": "form field",
            "file": "name of the file sent as"}[where]
    what = ("a NUL character (%00)" if "\x00" in bad
            else "text that is not valid Unicode (a lone surrogate)")
    return f"The {kind} '{_shown(name)}' holds {what}, which no text can store: nothing was written."


def _page_message(where: str, name: str, bad: str) -> str:
    called = _shown(str(_OWNER_NAMES.get(name, name.replace("_", " "))))
    if "\x00" not in bad:  # cannot come from a browser; said plainly all the same
        what = _("text that is not valid Unicode")
    elif where in ("form", "file"):
        what = _("a NUL character (an invisible control character, often from a paste)")
    else:
        what = _("a NUL character (%00)")
    if where == "form":
        return _("The “%(called)s” field holds %(what)s, which Broadside cannot store. Remove "
                 "it and send the form again: nothing was saved.", called=called, what=what)
    if where == "file":
        return _("The name of the file chosen for “%(called)s” holds %(what)s, which Broadside "
                 "cannot store. Rename the file and send the form again: nothing was saved.",
                 called=called, what=what)
    return _("The “%(called)s” in the address holds %(what)s, which Broadside cannot store or "
             "search for. Remove it and try again: nothing was changed.", called=called, what=what)


def refuse_unstorable_text() -> Response | None:
    """The before-request check: None to go on, else the 422 (or a ValidationError that
    webapp/errors.py answers in the request's shape)."""
    if request.url_rule is None or request.blueprint in EXEMPT_BLUEPRINTS:
        return None  # a 404 or 405 answers first; webhooks answer for themselves
    found = unstorable_input()
    if found is None:
        return None
    where, name, bad = found
    if request.path.startswith("/api/"):  # the API's shape, as webapp/errors.py decides it
        raise ValidationError(_api_message(where, name, bad), field=_shown(name))
    message = _page_message(where, name, bad)
    if request.htmx and not request.htmx.boosted:
        fragment = f'<p class="flash flash-error" role="alert">{escape(message)}</p>'
        return make_response(fragment, 422, retarget="#main", reswap="afterbegin")
    raise ValidationError(message, field=_shown(name))  # the error page (webapp/errors.py)


def _outside_the_api() -> Response | None:
    # The API's requests are checked by its own blueprint, after their token: a stranger
    # without one is answered 401 before anything about the input is said.
    if request.blueprint == "api":
        return None
    return refuse_unstorable_text()


def install_text_rule(app: Flask) -> None:
    """Run the check before every view (after CSRF and the sign-in check, registered first)."""
    app.before_request(_outside_the_api)
