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


def person(person_id: int, name: str, email: str, address: str = "") -> Actor:
    """A signed-in person: "Name <email>", or the email alone when they gave no name."""
    label = f"{name} <{email}>" if name else email
    return Actor(person_id=person_id, token_id=None, label=label, address=address)


def token(token_id: int, token_name: str, person_id: int | None, email: str,
          address: str = "") -> Actor:
    """An API token: "token “NAME” of email", and the person it belongs to."""
    return Actor(person_id=person_id, token_id=token_id,
                 label=f"token “{token_name}” of {email or 'nobody'}", address=address)
