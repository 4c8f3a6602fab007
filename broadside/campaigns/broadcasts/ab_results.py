"""PLACEHOLDER of helper "abtest" (the lead writes the real module): why an A/B test is not
possible for a broadcast (`ab_refusal`), and where a sent broadcast's test stands
(`report`). Written only so the pages and the API of the "abtest" branch run; the names,
signatures and the `AbReport` fields are the ones agreed with the lead.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.campaigns.analytics import modes
from broadside.campaigns.broadcasts import ab_test
from broadside.core.i18n import _
from broadside.core.models import Broadcast, Delivery, MailingList, PersonActivity, Revision
from broadside.core.timeutil import utcnow


class VariantReport(NamedTuple):
    figures: ab_test.VariantFigures
    subject: str


@dataclass(frozen=True)
class AbReport:
    phase: str  # "testing" | "waiting" | "decided"
    share: int
    measure: str
    wait_hours: int
    wait_until: datetime | None
    default: int
    variants: list[VariantReport]
    verdict: ab_test.Verdict | None
    decided_at: datetime | None


def ab_refusal(session: Session, broadcast: Broadcast) -> str | None:
    if broadcast.versions:
        return _("An A/B test compares versions of one message, and this broadcast has "
                 "versions in other languages. Remove them to run a test.")
    if broadcast.send_at_local:
        return _("An A/B test sends at one time: choose a test or each reader's own hour.")
    if modes.effective(session, broadcast) != modes.PER_PERSON:
        return _("An A/B test counts who opened or clicked each variant, so it needs "
                 "per-person tracking: choose it under Tracking.")
    if broadcast.list_id is not None:
        mailing_list = session.get(MailingList, broadcast.list_id)
        if mailing_list is not None and not mailing_list.per_person_tracking:
            return _("An A/B test counts who opened or clicked each variant: turn on "
                     "per-person tracking on this list's page first.")
    return None


def report(session: Session, broadcast_id: int) -> AbReport | None:
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None or not broadcast.ab_test or broadcast.ab_seed is None and \
            broadcast.ab_result is None:
        return None
    test = broadcast.ab_test
    revision = session.scalar(select(Revision).where(Revision.broadcast_id == broadcast_id))
    subjects = [v["subject"] for v in test["variants"]]
    if revision is not None:
        subjects[0] = revision.subject
        for key, message in (revision.variants or {}).items():
            subjects[int(key)] = message.get("subject", subjects[int(key)])
    verdict = None
    if broadcast.ab_result:
        record = broadcast.ab_result
        figures = [ab_test.VariantFigures(v["variant"], v["sent"], v["hits"])
                   for v in record["variants"]]
        verdict = ab_test.Verdict(winner=record["winner"], clear=record["clear"],
                                  p_value=record["p_value"], best=record["best"])
    else:
        kind = "open" if test["measure"] == "opens" else "click"
        sent = dict(session.execute(
            select(Delivery.variant, func.count()).where(
                Delivery.broadcast_id == broadcast_id, Delivery.variant >= 0,
                Delivery.status == "sent").group_by(Delivery.variant)).all())
        hits = dict(session.execute(
            select(Delivery.variant, func.count(func.distinct(PersonActivity.delivery_id)))
            .join(Delivery, Delivery.id == PersonActivity.delivery_id)
            .where(PersonActivity.broadcast_id == broadcast_id, PersonActivity.kind == kind,
                   Delivery.variant >= 0).group_by(Delivery.variant)).all())
        figures = [ab_test.VariantFigures(n, sent.get(n, 0), hits.get(n, 0))
                   for n in range(len(subjects))]
    if broadcast.ab_winner is not None:
        phase = "decided"
    elif broadcast.ab_wait_until is not None and broadcast.ab_wait_until > utcnow():
        phase = "waiting"
    else:
        phase = "testing"
    return AbReport(phase=phase, share=test["share"], measure=test["measure"],
                    wait_hours=test["wait_hours"], wait_until=broadcast.ab_wait_until,
                    default=test["default"],
                    variants=[VariantReport(f, subjects[f.variant]) for f in figures],
                    verdict=verdict, decided_at=broadcast.ab_decided_at)
