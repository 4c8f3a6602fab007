"""An A/B test on the send path (see ab_tests.py for what a test is).

- At Send (`freeze_variants`, `seed`): the variants after A are frozen into
  `Revision.variants`, each with the design and footer of the default version, and the seed
  that splits the audience is recorded on the broadcast.
- At the snapshot (`variant_expression`): each reader's row gets their variant, a draw from
  the seed and their subscriber id: in the test (`share` %) a variant 0..k-1, each as
  likely; else `REST`. The draw is a hash in SQL (two multiplicative steps modulo the prime
  2^31 - 1 with a square between them: the same on SQLite and PostgreSQL, in 64-bit
  integers), so a chunk written again after a crash draws the same.
- In the worker (`test_done`, `decide`): once no test row is pending or in flight, the wait
  starts (`ab_wait_until`, written once); when it is over, the winner is judged on the
  figures of that moment and written once, with them, by a guarded UPDATE
  (`WHERE ab_winner IS NULL`). The claim takes rows of the rest only after that
  (ledger.claim_due's `rest`), and sends them the winner.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, and_, case, cast, exists, literal, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from broadside.campaigns.broadcasts.ab_results import figures
from broadside.campaigns.broadcasts.ab_tests import REST, clean_ab_test, judge, result_record
from broadside.campaigns.content.bodies import WrittenBody
from broadside.core.db import rowcount
from broadside.core.events import record_event
from broadside.core.models import Broadcast, Delivery, Subscriber
from broadside.core.models.sending import DeliveryStatus
from broadside.core.timeutil import utcnow

_PRIME = 2_147_483_647  # 2^31 - 1: a square of a residue fits in 62 bits
_STEP_1 = 48_271
_STEP_2 = 16_807
_SLOTS = 10_000  # the share is drawn in hundredths of a percent


def seed() -> int:
    """The seed recorded at Send."""
    return secrets.randbelow(_PRIME - 1) + 1


def _draws(subscriber_id: Any, seed_value: int) -> tuple[Any, Any]:
    """(variant draw, share draw) for a subscriber id: SQL expressions or Python ints alike."""
    first = ((subscriber_id + seed_value) % _PRIME) * _STEP_1 % _PRIME
    square = first * first % _PRIME
    return square, (square + seed_value) * _STEP_2 % _PRIME


def variant_of(subscriber_id: int, test: dict[str, Any], seed_value: int) -> int:
    """The variant a subscriber is drawn (Python's side of `variant_expression`, for tests
    and the pages' estimates)."""
    pick, share = _draws(subscriber_id, seed_value)
    if share % _SLOTS < test["share"] * 100:
        return int(pick % len(test["variants"]))
    return REST


def variant_expression(ab_test: dict[str, Any] | None, seed_value: int | None
                       ) -> ColumnElement[Any] | None:
    """The snapshot's `variant` column for a reader (correlated on `Subscriber.id`); None when
    the broadcast has no test."""
    test = clean_ab_test(ab_test) if ab_test else None
    if test is None or seed_value is None:
        return None
    pick, share = _draws(cast(Subscriber.id, BigInteger), seed_value)
    return case((share % _SLOTS < test["share"] * 100, pick % len(test["variants"])),
                else_=literal(REST, Delivery.variant.type))


Freeze = Callable[[str, str, WrittenBody], Any]  # (subject, preheader, body) -> FrozenContent
BodyOf = Callable[[str], WrittenBody]  # a variant's own body as written -> the body to freeze


def freeze_variants(broadcast: Broadcast, written: WrittenBody, freeze: Freeze,
                    body_of: BodyOf) -> dict[str, Any] | None:
    """`Revision.variants`: each variant after A frozen as the default version is (its own
    subject; its preheader and body, or A's where it has none). None without a test."""
    test = clean_ab_test(broadcast.ab_test)
    if test is None:
        return None
    frozen: dict[str, Any] = {}
    for number, variant in enumerate(test["variants"][1:], start=1):
        body = body_of(variant["body"]) if variant["body"].strip() else written
        preheader = variant["preheader"] or broadcast.preheader
        made = freeze(variant["subject"], preheader, body)
        frozen[str(number)] = {"subject": variant["subject"], "preheader": preheader,
                               "html_template": made.html_template,
                               "text_template": made.text_template, "written": True,
                               "body": body.body}
    return frozen


_IN_PLAY = (DeliveryStatus.PENDING.value, DeliveryStatus.SENDING.value)


def test_done(session: Session, broadcast_id: int) -> bool:
    """No test row (variant 0..3) is pending or in flight."""
    return not session.scalar(select(exists().where(
        Delivery.broadcast_id == broadcast_id, Delivery.status.in_(_IN_PLAY),
        Delivery.variant >= 0)))


def start_wait(session: Session, broadcast: Broadcast, now: datetime) -> datetime:
    """The test's copies are all out: the wait ends `wait_hours` from now, written once (a
    second runner keeps the first's). Returns when it ends. Does not commit."""
    test = clean_ab_test(broadcast.ab_test)
    assert test is not None
    until = now + timedelta(hours=test["wait_hours"])
    if rowcount(session.execute(
            update(Broadcast).where(Broadcast.id == broadcast.id,
                                    Broadcast.ab_wait_until.is_(None))
            .values(ab_wait_until=until))) == 1:
        record_event(session, "ab_waiting", broadcast_id=broadcast.id,
                     detail=f"the winner is chosen at {until.isoformat(timespec='minutes')} UTC")
        return until
    return session.scalar(select(Broadcast.ab_wait_until).where(Broadcast.id == broadcast.id)) or until


def decide(session: Session, broadcast: Broadcast, now: datetime | None = None) -> int:
    """The winner, judged on the figures now and written once with them (guarded by
    `ab_winner IS NULL`: of two runners one writes, both read the same winner). Returns it.
    Does not commit."""
    now = now or utcnow()
    test = clean_ab_test(broadcast.ab_test)
    assert test is not None
    tallies = figures(session, broadcast.id, len(test["variants"]), test["measure"])
    verdict = judge(tallies, test["default"])
    record = result_record(tallies, verdict, test["measure"])
    if rowcount(session.execute(
            update(Broadcast).where(and_(Broadcast.id == broadcast.id,
                                         Broadcast.ab_winner.is_(None)))
            .values(ab_winner=verdict.winner, ab_decided_at=now, ab_result=record))) == 1:
        record_event(session, "ab_decided", broadcast_id=broadcast.id,
                     detail=(f"variant {'ABCD'[verdict.winner]} goes to the rest"
                             + ("" if verdict.clear else " (no clear winner: the default)")))
        return verdict.winner
    winner = session.scalar(select(Broadcast.ab_winner).where(Broadcast.id == broadcast.id))
    assert winner is not None
    return int(winner)
