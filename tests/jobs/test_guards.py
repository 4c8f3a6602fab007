"""Invariant 4 on its own: every delivery write is guarded, so a duplicated job changes nothing."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from broadside.campaigns.broadcasts import ledger
from broadside.core.models import Delivery
from broadside.delivery.smtp import SmtpTransport
from broadside.delivery.transports import DeliveryError
from jobs.broadcasts import broadcast_slice
from jobs.classify import Verdict, backoff, classify
from jobs.pacing import Pacer
from jobs.runtime import Runtime
from tests.helpers import counters, make_list, start_broadcast, worker_runtime
from webapp.extensions import db


def test_a_second_claim_of_the_same_rows_claims_nothing(app):
    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    rows = db.session.execute(select(Delivery.id, Delivery.subscriber_id)).all()
    assert len(ledger.claim(db.session, broadcast.id, rows)) == 3
    db.session.commit()
    assert ledger.claim(db.session, broadcast.id, rows) == []
    db.session.commit()
    assert counters(broadcast.id) == {"sending": 3}


def test_recording_an_outcome_twice_changes_nothing(app):
    weekly = make_list(db.session, 1)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    ((delivery_id, subscriber_id),) = db.session.execute(select(Delivery.id, Delivery.subscriber_id)).all()
    ledger.claim(db.session, broadcast.id, [(delivery_id, subscriber_id)])
    change = ledger.Change(delivery_id, subscriber_id, {"smtp_code": 250})
    assert ledger.transition(db.session, broadcast.id, [change], source="sending", target="sent") == [
        delivery_id
    ]
    assert ledger.transition(db.session, broadcast.id, [change], source="sending", target="sent") == []
    assert ledger.transition(db.session, broadcast.id, [change], source="sending", target="unknown") == []
    db.session.commit()
    assert counters(broadcast.id) == {"sent": 1}


def _runtime(app, smtp_server, identity: str) -> Runtime:
    return worker_runtime(app, SmtpTransport(smtp_server.url), identity=identity, SLICE_SECONDS=30)


@pytest.fixture
def make_runtime(app, smtp_server):
    made: list[Runtime] = []

    def make(identity: str) -> Runtime:
        made.append(_runtime(app, smtp_server, identity))
        return made[-1]

    yield make
    for runtime in made:
        runtime.transport.close()


def test_two_slices_racing_on_one_broadcast_never_send_twice(app, smtp_server, make_runtime):
    """What the lease normally prevents, the guarded claim still survives: two senders at
    once (say, a duplicated job on a stalled worker) each claim disjoint rows."""
    weekly = make_list(db.session, 60)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    assert make_runtime("racer").lease.try_acquire()
    results = []

    def race() -> None:
        with app.app_context():
            rt = _runtime(app, smtp_server, "racer")
            results.append(broadcast_slice(db.session, rt, broadcast.id).run())
            rt.transport.close()
            db.session.remove()

    threads = [threading.Thread(target=race) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    received = smtp_server.recipients()
    assert len(received) == 60 and len(set(received)) == 60
    assert counters(broadcast.id) == {"sent": 60}
    assert sum(r.attempts for r in results) == 60


def test_a_worker_that_lost_the_lease_sends_nothing(app, smtp_server, make_runtime):
    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    runtime = make_runtime("me")
    other = make_runtime("someone-else")
    assert other.lease.try_acquire()
    result = broadcast_slice(db.session, runtime, broadcast.id).run()
    assert result.outcome == "lost-lease" and smtp_server.recipients() == []
    assert counters(broadcast.id) == {"pending": 3}


def test_skipped_rows_cost_no_delay_while_sent_and_failed_rows_do(app, smtp_server, make_runtime):
    from sqlalchemy import update

    from broadside.core.models import Subscription

    weekly = make_list(db.session, 6)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    db.session.execute(
        update(Subscription)
        .where(
            Subscription.subscriber_id.in_(
                select(Delivery.subscriber_id).order_by(Delivery.id).limit(3).scalar_subquery()
            )
        )
        .values(status="unsubscribed")
    )
    db.session.commit()
    smtp_server.script.rcpt_replies = {"reader00005@example.com": ["550 5.1.1 no such user"]}
    runtime = make_runtime("pacer-test")
    runtime.lease.try_acquire()
    clock = [0.0]
    sleeps: list[float] = []
    runtime.pacer = Pacer(
        100,
        margin=0,
        clock=lambda: clock[0],
        sleep=lambda s: (sleeps.append(s), clock.__setitem__(0, clock[0] + s)),
    )
    broadcast_slice(db.session, runtime, broadcast.id).run()
    assert counters(broadcast.id) == {"sent": 2, "failed": 1, "skipped": 3}
    # Three real attempts (two sent, one failed): two waits of the full delay between them.
    assert sleeps == [pytest.approx(0.1), pytest.approx(0.1)]


def test_the_recheck_comes_after_the_pace_wait_not_before_it(app, smtp_server, make_runtime):
    """Invariant 3 at a slow pace: someone who leaves while the worker waits out the delay
    before their send is skipped (the re-check is made at the end of the wait)."""
    from sqlalchemy import update

    from broadside.core.models import Subscription

    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    second = db.session.scalars(select(Delivery.subscriber_id).order_by(Delivery.id)).all()[1]
    runtime = make_runtime("late-check")
    runtime.lease.try_acquire()
    clock = [0.0]
    engine = db.engine

    def sleep(seconds: float) -> None:
        # The second person leaves during the wait that precedes their send.
        with engine.begin() as connection:
            connection.execute(
                update(Subscription).where(Subscription.subscriber_id == second).values(status="unsubscribed")
            )
        clock[0] += seconds

    runtime.pacer = Pacer(200, margin=0, clock=lambda: clock[0], sleep=sleep)
    broadcast_slice(db.session, runtime, broadcast.id).run()
    assert smtp_server.recipients() == ["reader00000@example.com", "reader00002@example.com"]
    assert counters(broadcast.id) == {"sent": 2, "skipped": 1}


def test_pacer_spaces_the_starts_of_attempts():
    clock = [0.0]
    sleeps: list[float] = []
    pacer = Pacer(
        50,
        margin=0,
        clock=lambda: clock[0],
        sleep=lambda s: (sleeps.append(s), clock.__setitem__(0, clock[0] + s)),
    )
    starts = []
    for work in (0.0, 0.01, 0.2, 0.0):
        starts.append(pacer.wait())
        clock[0] += work  # the SMTP conversation itself
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert all(gap >= 0.05 - 1e-9 for gap in gaps)
    assert gaps[2] == pytest.approx(0.2)  # a slow send already spent the delay: no extra wait
    assert Pacer(50).margin > 0 and Pacer(0).margin == 0


def test_classifier_decides_once():
    def verdict(phase, code, reply="x", network=False):
        return classify(DeliveryError(phase, code, reply, network=network)).kind

    assert verdict("rcpt", 550, "5.1.1 no such user") == "recipient"
    assert verdict("rcpt", 551) == "recipient"
    assert verdict("rcpt", 553) == "recipient"
    assert verdict("rcpt", 451) == "transient"
    assert verdict("mail", 421) == "transient"
    assert verdict("data-end", 452) == "transient"
    assert verdict("connect", None, "refused", network=True) == "transient"
    assert verdict("rcpt", None, "timed out", network=True) == "transient"
    assert verdict("auth", 535) == "channel"
    assert verdict("rcpt", 530) == "channel"
    assert verdict("mail", 550, "sender rejected") == "channel"
    assert verdict("tls", None, "handshake failed") == "channel"
    assert verdict("data-end", 554, "content rejected") == "channel"
    assert verdict("rcpt", 599, "something new") == "channel"  # unrecognised: permanent
    assert verdict("data-body", None, "reset", network=True) == "ambiguous"
    assert isinstance(classify(DeliveryError("rcpt", 550, "x")), Verdict)


def test_backoff_grows_with_jitter_and_is_bounded():
    import random

    rng = random.Random(7)
    delays = [backoff(n, 10, rng).total_seconds() for n in range(1, 6)]
    for n, delay in enumerate(delays, start=1):
        assert 10 * 2 ** (n - 1) * 0.5 <= delay <= 10 * 2 ** (n - 1)
    assert backoff(30, 10, rng).total_seconds() <= 3600


def test_a_batched_outcome_moves_only_the_rows_still_in_flight(app):
    """The outcome flush writes a batch at once; rows someone else moved meanwhile (another
    worker's orphan repair, say) are neither moved again nor counted twice."""
    weekly = make_list(db.session, 4)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    rows = db.session.execute(select(Delivery.id, Delivery.subscriber_id).order_by(Delivery.id)).all()
    ledger.claim(db.session, broadcast.id, rows)
    db.session.commit()
    taken = ledger.Change(rows[1][0], rows[1][1])
    assert ledger.transition(db.session, broadcast.id, [taken], source="sending", target="unknown")
    db.session.commit()
    changes = [ledger.Change(d, s, {"smtp_code": 250}) for d, s in rows]
    moved = ledger.transition(db.session, broadcast.id, changes, source="sending", target="sent")
    db.session.commit()
    assert moved == [rows[0][0], rows[2][0], rows[3][0]]
    assert counters(broadcast.id) == {"sent": 3, "unknown": 1}


def test_a_transport_whose_last_reply_went_unread_starts_afresh(smtp_server):
    """A caller that failed between writing a message and reading its verdict leaves the
    stream out of step; the next message goes over a new connection instead of reading the
    old reply as its own."""
    transport = SmtpTransport(smtp_server.url)
    try:
        transport.start("news@example.com", "first@example.com", transport.wire(b"Subject: 1\r\n\r\none\r\n"))
        first_connection = transport.conn
        result = transport.send("news@example.com", "second@example.com", b"Subject: 2\r\n\r\ntwo\r\n")
        assert result.code == 250 and transport.conn is not first_connection
        smtp_server.wait_for(2)
        assert sorted(smtp_server.recipients()) == ["first@example.com", "second@example.com"]
    finally:
        transport.close()


def test_claims_cover_about_a_fifth_of_a_second_of_sends_at_the_rate_achieved():
    """The batch follows the rate (sends and skips per second, bookkeeping included) and the
    pace's ceiling, so a crash exposes about 0.2 s of sends, whatever the speed."""
    from jobs.engine import MAX_BATCH, batch_size_for, pace_limit

    assert batch_size_for(min(300.0, pace_limit(0))) == 60  # full speed, 300 a second
    assert batch_size_for(min(300.0, pace_limit(0.2))) == 1  # the default pace: one at a time
    assert batch_size_for(min(300.0, pace_limit(0.05))) == 4
    assert batch_size_for(min(8.0, pace_limit(0))) == 1  # a slow server: one at a time
    assert batch_size_for(10_000.0) == MAX_BATCH


@given(st.lists(st.sampled_from([b".", b"..", b"\r\n", b"\n", b"\r", b"a", b"From "]), max_size=16))
def test_the_data_payload_is_dot_stuffed_as_rfc_5321_says(parts):
    """Every line that begins with "." gets one more (RFC 5321 4.5.2), and the payload ends
    with CRLF "." CRLF, so no line of the message can end the transaction early."""
    import re

    message = b"".join(parts)
    expected = re.sub(rb"(?m)^\.", b"..", message)
    if not expected.endswith(b"\r\n"):
        expected += b"\r\n"
    assert SmtpTransport.wire(message) == expected + b".\r\n"
