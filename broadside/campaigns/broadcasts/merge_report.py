"""What a broadcast's merge fields will do to its recipients, told before it is sent: its
subject, preheader and body over its audience (`audience.audience_condition`, the people a
send would reach now), through the campaigns' one report (`broadside/campaigns/field_report.py`).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.audience import audience_condition
from broadside.campaigns.content.bodies import checked_body_of
from broadside.campaigns.field_report import MergeReport, field_problems, field_report
from broadside.core.models import Broadcast
from broadside.mail.merge_fields import MergeError

__all__ = ["MergeReport", "merge_problems", "merge_report"]


def _texts(session: Session, broadcast: Broadcast) -> dict[str, str]:
    # The body (and the owner's own plain-text part) as every freeze reads them: `body_of`
    # (in its format, blocks expanded).
    written = checked_body_of(session, broadcast)
    texts = {"subject": broadcast.subject or "", "preheader": broadcast.preheader or "",
             "body": written.body}
    if written.text_body is not None:  # the owner's own plain-text part has its own fields
        texts["plain-text part"] = written.text_body
    return texts


def merge_problems(session: Session, broadcast: Broadcast) -> list[MergeError]:
    """`merge_report(...).problems` (what refuses Send and Schedule), without counting anyone:
    the press asks only this."""
    return field_problems(_texts(session, broadcast), codes=broadcast.codes_prefix is not None)


def merge_report(session: Session, broadcast: Broadcast, *, limit: int | None = None
                 ) -> MergeReport:
    """What the broadcast's subject, preheader and body merge fields will do to its audience.
    With `limit`, at most that many recipients are looked at (the editor asks on every
    autosave; the send page the first 100,000)."""
    return field_report(session, _texts(session, broadcast), audience_condition(session, broadcast),
                        limit=limit, codes=broadcast.codes_prefix is not None)
