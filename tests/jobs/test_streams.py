"""One paced stream per sending identity, each held by its own lease, through real worker
processes and real SMTP servers."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast
from tests.helpers import (
    assert_nobody_twice,
    broadcast_status,
    get_jobs,
    make_identity,
    make_list,
    statuses,
    wait_until,
)
from tests.smtp_server import SmtpServer
from webapp.extensions import db


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Processes and leases, not SQL: SQLite, except where a stream's own queries run on both."""
    return request.param


def _send(app, list_id: int, identity_id: int | None, subject: str) -> Broadcast:
    draft = create_draft(db.session, list_id=list_id, subject=subject, body="Hello",
                         identity_id=identity_id)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue  # gone meanwhile
        if stat and int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _window(server: SmtpServer) -> tuple[float, float]:
    times = sorted(m.at for m in server.messages)
    return times[0], times[-1]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_identities_send_side_by_side_each_at_its_own_pace(
        app, app_config, smtp_server, second_server, worker_factory):
    """The worker serves both identities, a thread each: both streams run at once, and the gap
    between two sends at each server is never below that identity's own pace."""
    app_config["SEND_DELAY_MS"] = "60"
    product = make_identity("Product", second_server.url, delay_ms=90)
    news_list = make_list(db.session, 12, "News", domain="news.example")
    product_list = make_list(db.session, 12, "Product users", domain="users.example")
    worker = worker_factory()
    # Both streams ready, then both broadcasts at once.
    wait_until(lambda: worker.output.count("lease taken") == 2, timeout=30,
               message=lambda: worker.output)
    news = _send(app, news_list.id, None, "The news")
    launch = _send(app, product_list.id, product.id, "The launch")
    wait_until(lambda: broadcast_status(news.id) == "sent" and broadcast_status(launch.id) == "sent",
               timeout=60, message=lambda: worker.output)

    assert statuses(news.id) == {"sent": 12} and statuses(launch.id) == {"sent": 12}
    # From one process: no stream runs in a process of its own.
    assert worker.proc is not None and worker.proc.poll() is None
    assert _children(worker.proc.pid) == []
    news_rcpts = [r for m in smtp_server.messages for r in m.rcpt_tos]
    launch_rcpts = [r for m in second_server.messages for r in m.rcpt_tos]
    assert sorted(news_rcpts) == sorted(f"reader{i:05d}@news.example" for i in range(12))
    assert sorted(launch_rcpts) == sorted(f"reader{i:05d}@users.example" for i in range(12))
    assert_nobody_twice(news_rcpts + launch_rcpts)
    # Each stream its own pace, measured where it matters: at its server. (Two server threads
    # share this process, so one can record a MAIL FROM a stall late: the pace is read over
    # pairs of gaps, with 10% for jitter. Without pacing the gaps would be a millisecond or
    # two, and at the other identity's pace the pairs would be 30 ms short.)
    assert min(smtp_server.paired_gaps()) >= 0.060 * 0.9, smtp_server.gaps()
    assert min(second_server.paired_gaps()) >= 0.090 * 0.9, second_server.gaps()
    # Side by side: the two windows of sending overlap (one stream does not wait for the other).
    (a_start, a_end), (b_start, b_end) = _window(smtp_server), _window(second_server)
    assert a_start < b_end and b_start < a_end
    # The From of each is its identity's.
    assert all(m.mail_from == "news@product.example" for m in second_server.messages)
    assert all(m.mail_from != "news@product.example" for m in smtp_server.messages)


def test_a_worker_for_one_identity_serves_only_it(app, app_config, smtp_server, second_server,
                                                  worker_factory):
    """`worker --identity NAME`: that identity's broadcasts go out; the default's wait for a
    worker that serves the default."""
    product = make_identity("Product", second_server.url, delay_ms=0)
    news_list = make_list(db.session, 3, "News", domain="news.example")
    product_list = make_list(db.session, 3, "Product users", domain="users.example")
    news = _send(app, news_list.id, None, "The news")
    launch = _send(app, product_list.id, product.id, "The launch")

    worker = worker_factory("--identity", "product")  # names are case-insensitive
    wait_until(lambda: broadcast_status(launch.id) == "sent", timeout=30, message=lambda: worker.output)
    assert len(second_server.messages) == 3
    assert broadcast_status(news.id) == "queued" and smtp_server.messages == []

    default_worker = worker_factory("--identity", "default")
    wait_until(lambda: broadcast_status(news.id) == "sent", timeout=30,
               message=lambda: default_worker.output)
    assert len(smtp_server.messages) == 3


def test_a_second_worker_for_the_same_identity_waits(app, app_config, second_server, worker_factory):
    product = make_identity("Product", second_server.url, delay_ms=0)
    first = worker_factory("--identity", "Product")
    wait_until(lambda: "lease taken" in first.output, timeout=30, message=lambda: first.output)
    second = worker_factory("--identity", "Product")
    wait_until(lambda: "another worker holds the sending lease" in second.output, timeout=30,
               message=lambda: second.output)
    # The default identity's stream is another lease: a worker for it starts at once.
    default = worker_factory("--identity", "default")
    wait_until(lambda: "lease taken" in default.output, timeout=30, message=lambda: default.output)
    assert product.id is not None


def test_an_unknown_identity_name_stops_the_worker_with_a_message(app, app_config, worker_factory):
    worker = worker_factory("--identity", "Nobody")
    assert worker.proc is not None
    assert worker.proc.wait(30) == 2
    assert "no sending identity called 'Nobody'" in worker.output


def test_an_identity_added_while_the_worker_runs_gets_its_stream(
        app, app_config, smtp_server, second_server, worker_factory):
    worker = worker_factory()
    wait_until(lambda: "lease taken" in worker.output, timeout=30, message=lambda: worker.output)
    product = make_identity("Product", second_server.url, delay_ms=0)
    product_list = make_list(db.session, 2, "Product users", domain="users.example")
    launch = _send(app, product_list.id, product.id, "The launch")
    wait_until(lambda: broadcast_status(launch.id) == "sent", timeout=40, message=lambda: worker.output)
    assert len(second_server.messages) == 2
    db.session.commit()
    assert db.session.scalar(select(Broadcast.identity_id).where(Broadcast.id == launch.id)) == product.id
