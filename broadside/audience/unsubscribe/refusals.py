"""A mail server's refusal at RCPT, counted as a bounce (issue 40): a 5.1.1 and its kin
(jobs.classify `names_recipient`) suppress the address as a hard bounce, as a reported one
does; a full mailbox (552, 5.2.2) is one soft bounce in a row. Both for the worker
(jobs/outcomes.py), in the transaction that fails the row; the caller commits. The writes go
through `suppression.suppress_linked`, the one writer of `Subscriber.suppression`.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from broadside.audience.unsubscribe.suppression import SOFT_BOUNCE_LIMIT, Link, suppress_linked
from broadside.core.models import Subscriber


def suppress_refused(session: Session, subscriber_id: int, *, code: int, reply: str,
                     message_id: str | None = None) -> bool:
    """A mail server refused this address when it was sent to (RCPT), in words that name it
    (jobs.classify `names_recipient`): a hard bounce, as a reported one suppresses. For the
    worker, which calls it in the transaction that fails the row; the caller commits."""
    said = f"{code} {reply}".strip()[:500]
    return suppress_linked(session, subscriber_id, "bounced",
                     f"hard bounce: the mail server refused the address when it was sent to "
                     f"({said})", Link(message_id=message_id),
                     {"source": "smtp", "synchronous": True, "smtp_code": code, "reply": said})


def count_full_mailbox(session: Session, subscriber_id: int, *, code: int, reply: str,
                       message_id: str | None = None) -> bool:
    """A mail server refused this address at RCPT because its mailbox is full: one soft bounce
    in a row, counted in the database; the SOFT_BOUNCE_LIMIT-th suppresses as `bounced`. For
    the worker, in the transaction that fails the row; the caller commits. True: suppressed."""
    session.execute(
        update(Subscriber).where(Subscriber.id == subscriber_id)
        .values(soft_bounce_count=Subscriber.soft_bounce_count + 1)
        .execution_options(synchronize_session=False))
    count = session.scalar(select(Subscriber.soft_bounce_count)
                           .where(Subscriber.id == subscriber_id)) or 0
    said = f"{code} {reply}".strip()[:500]
    return count >= SOFT_BOUNCE_LIMIT and suppress_linked(
        session, subscriber_id, "bounced",
        f"{count} soft bounces in a row; the last: the mail server refused the address when "
        f"it was sent to ({said})", Link(message_id=message_id),
        {"source": "smtp", "synchronous": True, "smtp_code": code, "reply": said,
         "soft_bounce_count": count})
