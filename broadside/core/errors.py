"""Domain exceptions. Their message is safe to show to the user; `webapp.errors` maps each
class to an HTTP status, and the worker and the CLI print the message.

`shown`: a reason recorded earlier (a delivery's, a pause's) as a page or an API answer may
show it. Today's worker writes every reason in the owner's words; one an older version
recorded with a Python exception's text is replaced by where its details are."""

from __future__ import annotations

import re
from typing import overload

_RAW = re.compile(r"\b[A-Z][A-Za-z]+(?:Error|Exception)\b|Traceback|codec can't|"
                  r"object has no attribute|object at 0x|\[Errno|\berrno\b")
HIDDEN = "the details are in the worker's log"


@overload
def shown(reason: str) -> str: ...
@overload
def shown(reason: None) -> None: ...
def shown(reason: str | None) -> str | None:
    """A recorded reason as the owner may see it: never a Python exception's text."""
    return HIDDEN if reason and _RAW.search(reason) else reason


class DomainError(Exception):
    """An error a domain function raises; the message is safe to show to the user. `field`,
    when the error is about one input (its form field's and its API field's name), lets a
    form show the message under that input."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ValidationError(DomainError):
    status_code = 422


class NotFound(DomainError):
    status_code = 404


class Conflict(DomainError):
    status_code = 409


class Forbidden(DomainError):
    """The person's role (or their token's) does not allow this; nothing was changed."""

    status_code = 403
