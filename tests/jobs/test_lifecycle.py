"""The broadcast lifecycle's transition table, walked whole: every transition attempted from
every state, on both databases. An allowed one moves the row, sets its fields and appends
exactly one event; every other one is refused and changes nothing at all."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BindParameter, insert, select, update

from broadside.campaigns.broadcasts import lifecycle
from broadside.campaigns.broadcasts.lifecycle import NOW, TRANSITIONS
from broadside.core.models import Broadcast, Delivery, Event
from broadside.core.models.sending import BroadcastStatus
from broadside.core.timeutil import utcnow
from tests.helpers import make_list
from webapp.extensions import db

GIVEN = {"pause_reason": "a reason given by the caller", "scheduled_at": datetime(2099, 1, 2, 9, 30)}
BEFORE = {
    "pause_reason": "an earlier reason",
    "notice": "an earlier notice",
    "auto_resumes": 3,
    # Ten settled (5 + 2 + 3), three more than when it was last resumed automatically.
    "sent_count": 5,
    "skipped_count": 2,
    "failed_count": 3,
    "settled_at_resume": 7,
    "scheduled_at": datetime(2098, 5, 6, 7, 8),
    "queued_at": datetime(2020, 1, 1, 0, 0),
    "started_at": None,
    "finished_at": datetime(2020, 1, 2, 0, 0),
    "updated_at": datetime(2020, 1, 3, 0, 0),
}


def snapshot(broadcast_id: int) -> dict:
    db.session.expire_all()
    row = db.session.execute(
        select(Broadcast.__table__).where(Broadcast.__table__.c.id == broadcast_id)
    ).one()
    db.session.commit()
    return dict(row._mapping)


def events_of(broadcast_id: int) -> list[tuple[str, str]]:
    rows = db.session.execute(
        select(Event.kind, Event.detail).where(Event.broadcast_id == broadcast_id).order_by(Event.id)
    ).all()
    db.session.commit()
    return [tuple(r) for r in rows]


def broadcast_in(list_id: int, state: BroadcastStatus) -> int:
    broadcast = Broadcast(list_id=list_id, subject="Hello", body="Hi", status=state.value, **BEFORE)
    db.session.add(broadcast)
    db.session.commit()
    return broadcast.id


def expected_value(name: str, column: str, value, before: dict, moved_at: datetime):
    """What a field set by a transition must read afterwards."""
    if value is NOW:
        return moved_at
    if isinstance(value, BindParameter):
        return GIVEN[column]
    if value is None or isinstance(value, int | str):
        return value
    # SQL expressions in the table: checked one by one, so a new one must be added here.
    return {
        ("start", "started_at"): before["started_at"] or moved_at,
        # Progress since the last automatic resumption: a new run, counted from one.
        ("auto_resume", "auto_resumes"): 1,
        ("auto_resume", "settled_at_resume"): 10,
        ("resume", "settled_at_resume"): 10,
        ("send_again", "settled_at_resume"): 10,
    }[(name, column)]


def test_every_transition_from_every_state_moves_exactly_when_the_table_allows(app):
    weekly = make_list(db.session, 0)
    walked = 0
    for name, transition in TRANSITIONS.items():
        for state in BroadcastStatus:
            broadcast_id = broadcast_in(weekly.id, state)
            before = snapshot(broadcast_id)
            ran_then: list[bool] = []
            started = utcnow()
            moved = lifecycle.move(
                db.session,
                broadcast_id,
                name,
                then=lambda ran=ran_then: ran.append(True) and None,
                **{key: GIVEN[key] for key in transition.given},
            )
            db.session.commit()
            after = snapshot(broadcast_id)
            events = events_of(broadcast_id)
            walked += 1
            case = f"{name} from {state}"
            if state not in transition.sources:
                assert moved is False, case
                assert after == before, f"{case}: refused, yet the row changed"
                assert events == [], f"{case}: refused, yet an event was written"
                assert ran_then == [], f"{case}: refused, yet `then` ran"
                continue
            assert moved is True, case
            assert ran_then == [True], case
            assert after["status"] == transition.target, case
            assert events == [(transition.event, transition.detail)], case
            moved_at = after["updated_at"]
            assert started <= moved_at <= utcnow(), case
            for column, value in transition.sets.items():
                assert after[column] == expected_value(name, column, value, before, moved_at), (
                    f"{case}: {column}"
                )
            untouched = set(before) - set(transition.sets) - {"status", "updated_at"}
            assert {k: after[k] for k in untouched} == {k: before[k] for k in untouched}, case
    assert walked == len(TRANSITIONS) * len(BroadcastStatus)


def test_the_table_names_only_real_states_and_every_state_is_reachable():
    targets = {t.target for t in TRANSITIONS.values()}
    sources = {s for t in TRANSITIONS.values() for s in t.sources}
    assert set(BroadcastStatus) - {lifecycle.INITIAL} <= targets
    # Every state but the two ends can be left; sent can be left only by the owner's send again.
    assert set(BroadcastStatus) - {BroadcastStatus.CANCELLED} == sources


def test_finish_is_refused_while_a_row_is_pending_or_in_flight(app):
    weekly = make_list(db.session, 0)
    for status in ("pending", "sending"):
        broadcast_id = broadcast_in(weekly.id, BroadcastStatus.SENDING)
        db.session.execute(insert(Delivery).values(broadcast_id=broadcast_id, status=status))
        db.session.commit()
        before = snapshot(broadcast_id)
        assert lifecycle.move(db.session, broadcast_id, "finish") is False
        db.session.commit()
        assert snapshot(broadcast_id) == before
        assert events_of(broadcast_id) == []


def test_a_pause_carries_its_reason_into_the_row_and_the_event(app):
    weekly = make_list(db.session, 0)
    broadcast_id = broadcast_in(weekly.id, BroadcastStatus.SENDING)
    assert lifecycle.pause(db.session, broadcast_id, "The mail server refused our login.")
    db.session.commit()
    after = snapshot(broadcast_id)
    assert (after["status"], after["pause_reason"], after["notice"]) == (
        "paused", "The mail server refused our login.", None)
    assert events_of(broadcast_id) == [("paused", "The mail server refused our login.")]
    # Pressed twice (or by the owner after the worker): the second is refused.
    assert lifecycle.pause(db.session, broadcast_id, "again") is False
    db.session.commit()
    assert snapshot(broadcast_id) == after


def test_the_notice_is_written_only_while_sending_and_is_not_an_event(app):
    weekly = make_list(db.session, 0)
    for state in BroadcastStatus:
        broadcast_id = broadcast_in(weekly.id, state)
        before = snapshot(broadcast_id)
        written = lifecycle.set_notice(db.session, broadcast_id, "Waiting for the hourly limit.")
        db.session.commit()
        after = snapshot(broadcast_id)
        assert written is (state == BroadcastStatus.SENDING), state
        if written:
            assert after["notice"] == "Waiting for the hourly limit."
            assert {k: v for k, v in after.items() if k not in ("notice", "updated_at")} == {
                k: v for k, v in before.items() if k not in ("notice", "updated_at")}
        else:
            assert after == before, state
        assert events_of(broadcast_id) == []


def test_automatic_resumptions_count_only_runs_without_progress(app):
    weekly = make_list(db.session, 0)
    broadcast_id = broadcast_in(weekly.id, BroadcastStatus.SENDING)
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id)
                       .values(auto_resumes=0, settled_at_resume=0, sent_count=0, skipped_count=0,
                               failed_count=0))
    db.session.commit()
    for expected in (1, 2, 3):  # nothing settled between them: the run grows
        assert lifecycle.move(db.session, broadcast_id, "auto_resume")
        db.session.commit()
        assert snapshot(broadcast_id)["auto_resumes"] == expected
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id).values(sent_count=4))
    db.session.commit()
    assert lifecycle.move(db.session, broadcast_id, "auto_resume")  # four sent since: a new run
    db.session.commit()
    after = snapshot(broadcast_id)
    assert (after["auto_resumes"], after["settled_at_resume"]) == (1, 4)
    assert lifecycle.stalled(db.session, broadcast_id) is None
