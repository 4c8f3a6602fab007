"""An A/B test's figures and what the pages read of it: whether a broadcast can have a test
(`ab_refusal`), each variant's tallies (`figures`), and the test's state (`report`).

A variant's tallies count only copies that could be told apart: sent to a reader on a list
tracking per person (a segment's readers on other lists are tracked in aggregate only, so
they are in neither the sends nor the hits). Hits are human unique opens or clicks: the
distinct copies with a per-person open (or click), which bots never write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import distinct, func, select
from sqlalchemy.orm import Session

from broadside.campaigns.analytics import modes
from broadside.campaigns.broadcasts.ab_tests import VariantFigures, Verdict, clean_ab_test
from broadside.core.i18n import _
from broadside.core.models import Broadcast, Delivery, MailingList, PersonActivity
from broadside.core.models.sending import DeliveryStatus


def ab_refusal(session: Session, broadcast: Broadcast) -> str | None:
    """Why this broadcast cannot run an A/B test, in the owner's words; None when it can."""
    if broadcast.versions:
        return _("An A/B test compares versions of one message, and this broadcast has "
                 "versions in other languages. Remove them to run a test.")
    if broadcast.send_at_local:
        return _("An A/B test sends at one time: choose a test or each reader's own hour.")
    if modes.effective(session, broadcast) != modes.PER_PERSON:
        return _("An A/B test counts who opened or clicked each variant, so it needs "
                 "per-person tracking: choose it under Tracking.")
    if broadcast.list_id is not None:
        tracked = session.scalar(select(MailingList.per_person_tracking)
                                 .where(MailingList.id == broadcast.list_id))
        if not tracked:
            return _("An A/B test counts who opened or clicked each variant: turn on "
                     "per-person tracking on this list's page first.")
    elif not session.scalar(select(func.count()).select_from(MailingList)
                            .where(MailingList.per_person_tracking.is_(True))):
        return _("An A/B test counts who opened or clicked each variant: turn on per-person "
                 "tracking on a list this segment reaches first.")
    return None


def figures(session: Session, broadcast_id: int, variants: int, measure: str
            ) -> list[VariantFigures]:
    """Each test variant's copies sent (to readers tracked per person) and its hits."""
    tracked_list = select(MailingList.id).where(MailingList.per_person_tracking.is_(True))
    sent = dict(session.execute(
        select(Delivery.variant, func.count())
        .where(Delivery.broadcast_id == broadcast_id, Delivery.variant >= 0,
               Delivery.status == DeliveryStatus.SENT.value,
               Delivery.list_id.in_(tracked_list.scalar_subquery()))
        .group_by(Delivery.variant)).all())
    kind = "open" if measure == "opens" else "click"
    hits = dict(session.execute(
        select(Delivery.variant, func.count(distinct(PersonActivity.delivery_id)))
        .join(Delivery, Delivery.id == PersonActivity.delivery_id)
        .where(PersonActivity.broadcast_id == broadcast_id, PersonActivity.kind == kind,
               Delivery.variant >= 0)
        .group_by(Delivery.variant)).all())
    return [VariantFigures(number, int(sent.get(number, 0)), int(hits.get(number, 0)))
            for number in range(variants)]


@dataclass(frozen=True)
class VariantRow:
    figures: VariantFigures
    subject: str


@dataclass(frozen=True)
class AbReport:
    phase: str  # "testing" (copies of the test still going out), "waiting", "decided"
    share: int
    measure: str  # "opens" | "clicks"
    wait_hours: int
    wait_until: datetime | None
    default: int
    variants: list[VariantRow]
    verdict: Verdict | None  # once decided
    decided_at: datetime | None


def report(session: Session, broadcast_id: int) -> AbReport | None:
    """The test of a broadcast that was sent with one (None otherwise): while it runs, the
    figures so far; once decided, the figures the decision was made on."""
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None or broadcast.ab_seed is None:
        return None
    test = clean_ab_test(broadcast.ab_test)
    if test is None:
        return None
    subjects = [variant["subject"] for variant in test["variants"]]
    verdict = None
    result: dict[str, Any] | None = broadcast.ab_result
    if broadcast.ab_winner is not None and result:
        tallies = [VariantFigures(int(item["variant"]), int(item["sent"]), int(item["hits"]))
                   for item in result["variants"]]
        verdict = Verdict(winner=int(broadcast.ab_winner), clear=bool(result["clear"]),
                          p_value=float(result["p_value"]), best=int(result["best"]))
        phase = "decided"
    else:
        tallies = figures(session, broadcast_id, len(subjects), test["measure"])
        phase = "waiting" if broadcast.ab_wait_until is not None else "testing"
    return AbReport(phase=phase, share=test["share"], measure=test["measure"],
                    wait_hours=test["wait_hours"], wait_until=broadcast.ab_wait_until,
                    default=test["default"],
                    variants=[VariantRow(f, subjects[f.variant]) for f in tallies],
                    verdict=verdict, decided_at=broadcast.ab_decided_at)
