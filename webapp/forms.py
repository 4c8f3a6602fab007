"""What every owner form does at its two ends: a refusal shown under the input it is about,
and a success answered with a redirect (Post/Redirect/Get), so reloading the page that follows
sends nothing again.

- `place_error(form, exc)`: a domain error (`broadside.core.errors.DomainError`) goes under
  the field its `field` names (the templates' `field` macro adds aria-invalid and
  aria-describedby), or above the form when it is about no one field; never under a field
  it is not about.
- `after_post(location)`: 303 See Other to the page that shows the result; to htmx, which
  would follow a redirect inside its XHR and swap a whole page into a fragment, the same
  location as `HX-Redirect` (a full navigation).
- `keep_for_one_read(name, value)` / `read_once(name)`: a secret shown once (a new API token)
  crosses that redirect in the signed session cookie and is removed by the page that shows
  it, never put in a URL.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask import Response, redirect, session
from flask_wtf import FlaskForm

from broadside.core.errors import DomainError
from webapp.htmx import make_response, request

_ONCE = "_shown_once"


def place_error(form: FlaskForm, exc: DomainError, *,
                aliases: Mapping[str, str] | None = None) -> None:
    """Show `exc` under the field of `form` it is about (`exc.field`, through `aliases` when
    the domain names it otherwise), else as an error of the whole form."""
    name = exc.field and (aliases or {}).get(exc.field, exc.field)
    field = form._fields.get(name) if name else None
    if field is not None:
        field.errors = [*field.errors, exc.message]
    else:
        form.form_errors.append(exc.message)


def after_post(location: str) -> Response:
    """The answer to a form that succeeded: GET `location` next (303 See Other)."""
    if request.htmx and not request.htmx.boosted:
        return make_response("", 204, redirect=location)
    return redirect(location, 303)


def keep_for_one_read(name: str, value: str) -> None:
    session.setdefault(_ONCE, {})[name] = value
    session.modified = True


def read_once(name: str) -> str | None:
    """The value kept under `name`, removed as it is read: a reload shows it no more."""
    kept = session.get(_ONCE)
    if not kept or name not in kept:
        return None
    value = kept.pop(name)
    if not kept:
        session.pop(_ONCE)
    session.modified = True
    return value
