"""Who is acting: the person or API token behind the current change, for the audit log and
the events' actor (broadside.core.audit, broadside.core.events).

The web app sets it for each request once it knows who signed in or which token was shown
(`acting`), the CLI for its commands; the worker never does, so what it writes has no actor.
A ContextVar, so each request's thread (or task) sees its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    person_id: int | None
    token_id: int | None
    # In words, as it is now: "Ana Lima <ana@example.com>", "token “deploy” of
    # ana@example.com", "command line"
    label: str
    # Where from: the client's address ("" from the command line).
    address: str = ""


COMMAND_LINE = Actor(person_id=None, token_id=None, label="command line")

_CURRENT: ContextVar[Actor | None] = ContextVar("broadside_actor", default=None)


def current() -> Actor | None:
    return _CURRENT.get()


@contextmanager
def acting(actor: Actor | None) -> Iterator[None]:
    marker = _CURRENT.set(actor)
    try:
        yield
    finally:
        _CURRENT.reset(marker)


def begin(actor: Actor | None) -> object:
    """Set the actor until `end(marker)` (for request hooks, which cannot hold a `with`)."""
    return _CURRENT.set(actor)


def end(marker: object) -> None:
    _CURRENT.reset(marker)  # type: ignore[arg-type]
