"""The reputation guard runs on each stream's maintenance tick, for the stream's own identity:
a new mark makes it look at once (and pause at the limit, after which the stream's broadcasts
say why they wait); with nothing new it does not read the send tables again within a minute."""

from __future__ import annotations

from sqlalchemy import event

from broadside.core.models import Broadcast, Identity
from broadside.delivery.identities import service as identities
from jobs.maintenance import ensure_jobs, guard_reputation
from tests.broadside.feedback import sends
from tests.helpers import make_identity, worker_runtime
from webapp.extensions import db


def test_the_tick_pauses_its_own_identity_at_the_limit_and_reads_nothing_without_news(app):
    product = make_identity("Product", "outbox://", 0).id
    news, sent = sends.broadcast(product, sends.times(200))
    for one in sent[:9]:
        sends.bounce_delivery(news, one)  # 4.5 %
    rt = worker_runtime(app, transport=None)
    rt.identity_id, rt.identity_name = product, "Product"
    default = worker_runtime(app, transport=None)  # the default identity's stream

    ensure_jobs(db.session, rt)
    assert db.session.get(Identity, product).status == "active"

    statements: list[str] = []
    engine = db.session.get_bind()
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        assert guard_reputation(db.session, rt) is None  # nothing new: not judged again
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert not [s for s in statements if "deliveries" in s]

    sends.bounce_delivery(news, sent[9])  # 5 %: a new mark, judged at the next tick
    ensure_jobs(db.session, default)  # another identity's stream leaves it alone
    db.session.expire_all()
    assert db.session.get(Identity, product).status == "active"
    ensure_jobs(db.session, rt)
    db.session.expire_all()
    row = db.session.get(Identity, product)
    assert row.status == "paused"
    assert row.pause_reason == ("Paused by the reputation guard: 5 % hard bounces over the "
                                "last 200 sends (limit 5 %).")
    waiting, _ = sends.broadcast(product, sends.times(1), finished=False)
    ensure_jobs(db.session, rt)
    db.session.expire_all()
    assert "Paused by the reputation guard" in (db.session.get(Broadcast, waiting).notice or "")
    identities.resume(db.session, product)
