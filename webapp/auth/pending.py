"""A sign-in half done: the password was right, the second factor is still to come.

The browser holds it in its (signed) Flask session: the person's id, their session epoch and
when the password was checked. It is valid five minutes and only while the person's
password is unchanged since (the epoch), and it is what lets the public second-step pages
(`/login/two-factor`, and `/login/two-factor/enrol` where the owner requires two-factor)
show anything: without it they send the browser back to the password. Nobody is signed in
until the second step succeeds (webapp.security.sign_in); the state is removed then, and by
signing out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from flask import session

from broadside.core.models import Owner

KEY = "two_factor_pending"
LIFETIME_SECONDS = 5 * 60


@dataclass(frozen=True)
class Pending:
    person_id: int
    epoch: int
    next_url: str
    enrol: bool  # the owner requires two-factor and this person has none yet


def begin(person: Owner, next_url: str, *, enrol: bool) -> None:
    session[KEY] = {"person": person.id, "epoch": person.session_epoch,
                    "at": int(time.time()), "next": next_url, "enrol": enrol}


def read() -> Pending | None:
    """The browser's pending sign-in while it is valid; None otherwise."""
    kept = session.get(KEY)
    if not isinstance(kept, dict):
        return None
    person, epoch, at = kept.get("person"), kept.get("epoch"), kept.get("at")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (person, epoch, at)):
        return None
    if not 0 <= time.time() - at <= LIFETIME_SECONDS:
        return None
    next_url = kept.get("next")
    return Pending(person_id=person, epoch=epoch,
                   next_url=next_url if isinstance(next_url, str) else "/",
                   enrol=kept.get("enrol") is True)


def clear() -> None:
    session.pop(KEY, None)
