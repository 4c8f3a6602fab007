"""The reputation guard: an identity whose hard-bounce or complaint rate over its last 1,000
sends is at or over its limit (with at least `MIN_SENDS` sends counted) is paused, through the
identity lifecycle (its one writer), with the reason and the figures, and the
`identity.paused` webhook event in the same transaction.

When it runs: on the worker's maintenance tick, each stream for its own identity (jobs/
maintenance.py), not after each feedback event. Bounces and complaints arrive by several
roads (providers' webhooks in the web process, the worker's refusals at RCPT, a bounce
mailbox), and all of them write a mark (broadside.audience.unsubscribe.reputation_marks); the
tick reads the marks whatever wrote them, so no road can forget to call the guard, and a burst
of a thousand bounce webhooks costs one evaluation, not a thousand. The tick runs every few
seconds, which is soon enough: the stream that would send the next message is the one that
pauses itself. It never runs per message sent.

Once: the lifecycle's pause is guarded on `active`, so a paused identity is not paused again
(no second reason, no second webhook). After the owner resumes, only new evidence counts:
the window holds the sends after the guard's last pause of that identity (its
`ReputationPause`), so the sends and marks that paused it never pause it again.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.core.models import ReputationPause
from broadside.core.timeutil import utcnow
from broadside.delivery.identities import lifecycle
from broadside.feedback.reputation import figures as reading
from broadside.feedback.reputation.lines import lines, over_limit


def counting_from(session: Session, identity_id: int | None) -> datetime | None:
    """The guard's last pause of this identity: it counts only sends after it (None: all)."""
    return session.scalar(select(func.max(ReputationPause.paused_at)).where(
        ReputationPause.identity_key == reading.identity_key(identity_id)))


def check(session: Session, identity_id: int | None, *, label: str = "") -> str | None:
    """Judge the identity's last 1,000 sends (since the guard's last pause of it); pause it
    when a rate is at or over its limit. Returns the reason when this call paused it, the pause
    and its record committed together; writes nothing otherwise."""
    since = counting_from(session, identity_id)
    window = reading.last_window(session, identity_id, after=since)
    judged_by = lines(session)
    reason = over_limit(window, judged_by)
    if reason is None:
        return None
    now = utcnow()
    data = {"window": f"last {window.sends} sends", **window.as_data(), **judged_by.as_data(),
            "counted_from": since.isoformat() if since else None,
            "paused_by": "reputation_guard"}
    if not lifecycle.pause(session, identity_id, reason, label=label or "default",
                           figures=data):
        session.commit()  # (the default's settings row, if its pause just created it)
        return None  # already paused (by the guard or the channel): once is enough
    session.add(ReputationPause(identity_key=reading.identity_key(identity_id), paused_at=now,
                                reason=reason, figures=data))
    session.commit()
    return reason
