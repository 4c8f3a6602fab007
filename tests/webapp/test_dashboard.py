"""The dashboard home: recent broadcasts with state and progress, list sizes, and the banner
that says sending is stopped."""

from __future__ import annotations

import html
import re

import pytest
from redis import Redis
from sqlalchemy import event, update

from broadside.campaigns.broadcasts import drafts
from broadside.core.models import Broadcast, MailingList, Subscriber, Subscription
from tests.helpers import make_list, start_broadcast
from tests.smtp_server import free_port
from webapp.extensions import db, namespaced

HTMX = {"HX-Request": "true"}


def test_banner_says_sending_is_stopped_when_no_worker_holds_the_lease(logged_in_client, redis_client):
    page = logged_in_client.get("/")
    assert 'id="sending-banner"' in page.text
    assert "Sending is stopped: the worker is not running." in page.text
    redis_client.set(namespaced("worker:lease"), "worker-1", ex=30)  # what a live worker holds
    page = logged_in_client.get("/")
    assert "Sending is stopped" not in page.text


@pytest.mark.parametrize("backend", ["sqlite"])
def test_banner_says_where_redis_is_not_answering_and_how_to_start_it(app, logged_in_client):
    # Signed in (the sign-in throttle needs Redis), then nothing listening at REDIS_URL.
    working, working_url = app.extensions["broadside_redis"], app.config["REDIS_URL"]
    port = free_port()
    app.config["REDIS_URL"] = f"redis://:hunter2-redis@127.0.0.1:{port}/0"
    app.extensions["broadside_redis"] = Redis.from_url(app.config["REDIS_URL"], socket_connect_timeout=1)
    try:
        page = logged_in_client.get("/")
        live = html.unescape(logged_in_client.get("/system/live").text)  # the System page: alike
    finally:
        app.extensions["broadside_redis"].close()
        app.extensions["broadside_redis"] = working
        app.config["REDIS_URL"] = working_url
    assert page.status_code == 200
    banner = re.search(r'id="sending-banner">([^<]*)<', page.text)
    assert banner, page.text
    assert html.unescape(banner.group(1)).split() == (
        f"Sending is stopped. Redis is not answering at redis://:****@127.0.0.1:{port}/0: start it, "
        "e.g. `sudo apt-get install redis-server` (Debian/Ubuntu) or `brew install redis && brew "
        "services start redis` (macOS).").split()
    assert "hunter2-redis" not in page.text + live
    assert f"Redis is not answering at redis://:****@127.0.0.1:{port}/0: start it, e.g." in live


def test_list_sizes_count_who_a_send_would_reach_with_bounded_queries(logged_in_client):
    weekly = make_list(db.session, 5)
    make_list(db.session, 0, name="Empty")
    db.session.execute(update(Subscription).where(Subscription.subscriber_id.in_([1, 2]))
                       .values(status="unsubscribed"))
    db.session.execute(update(Subscriber).where(Subscriber.id == 3).values(suppression="bounced"))
    db.session.commit()
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append(" ".join(statement.lower().split()))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        page = logged_in_client.get("/")
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert re.search(rf'id="list-size-{weekly.id}">2</td>', page.text)  # 5 - 2 left - 1 bounced
    assert ">Empty</a>" in page.text
    # Each list counted on its own, never past the cap (a LIMIT); the suppressed in one query;
    # the growth chart one more (tests/webapp/test_growth.py).
    counts = [s for s in seen if "from subscriptions where subscriptions.list_id" in s and "limit" in s]
    assert len(counts) == 2
    # The suppressed: counted first on the suppression index (a LIMIT), then matched with the
    # active subscriptions of the lists counted exactly that have members (Weekly, not Empty).
    assert [s for s in seen if s.startswith("select count(") and "suppression is not null" in s
            and "limit" in s]
    suppressed = [s for s in seen if "group by" in s and "suppression is not null" in s]
    assert len(suppressed) == 1 and re.search(r"subscriptions\.list_id( \+ 0)? in", suppressed[0])
    # Past the cap: said as such (SQLite) or as PostgreSQL's estimate, never read to the end.
    from broadside.audience.list_sizes import list_sizes

    sizes = {size.id: size for size in list_sizes(db.session, cap=2)}
    assert sizes[weekly.id].active is None and re.fullmatch(r"more than 2|about \d+", sizes[weekly.id].shown)
    # More suppressed people than it looks up: an exact list says "at most" its active ones.
    sizes = {size.id: size for size in list_sizes(db.session, suppressed_cap=0)}
    assert sizes[weekly.id].active is None and sizes[weekly.id].shown == "at most 3"


def test_recent_broadcasts_show_state_and_progress_and_poll_only_while_sending(app, logged_in_client):
    weekly = make_list(db.session, 10)
    drafts.create_draft(db.session, list_id=weekly.id, subject="Still a draft")
    moving = start_broadcast(app, weekly, subject="Going out now", enqueue=False)
    db.session.execute(update(Broadcast).where(Broadcast.id == moving.id).values(
        status="sending", pending_count=6, sent_count=4))
    db.session.commit()
    page = logged_in_client.get("/").text
    assert "Going out now" in page and "Still a draft" in page
    assert '<span class="badge badge-sending">sending</span>' in page
    assert re.search(r'<progress max="10" value="4"\s+aria-label="Progress of Going out now">', page)
    assert "4 sent of 10" in page and "not sent yet" in page
    assert 'hx-get="/dashboard/recent" hx-trigger="every 3s"' in page

    db.session.execute(update(Broadcast).where(Broadcast.id == moving.id).values(
        status="sent", pending_count=0, sent_count=10))
    db.session.commit()
    fragment = logged_in_client.get("/dashboard/recent", headers=HTMX)
    assert fragment.status_code == 286 and "hx-trigger" not in fragment.text
    assert '<span class="badge badge-sent">sent</span>' in fragment.text


def test_dashboard_shows_names_as_text(logged_in_client):
    db.session.add(MailingList(name="<script>alert('list')</script>"))
    db.session.commit()
    page = logged_in_client.get("/").text
    assert "<script>alert(" not in page
    assert "&lt;script&gt;alert(&#39;list&#39;)&lt;/script&gt;" in page


def test_a_list_far_past_the_cap_is_estimated_without_counting_on_postgresql(app, backend):
    """PostgreSQL: a list the planner's statistics put far past the cap is said as an
    estimate with no COUNT run (at a million, each such list saved 100,001 index entries)."""
    from sqlalchemy import text

    from broadside.audience.subscribers.search import Filters
    from broadside.audience.subscribers.total import count_matching

    weekly = make_list(db.session, 12)
    db.session.commit()
    if backend == "postgresql":
        db.session.execute(text("ANALYZE subscriptions"))
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append(" ".join(statement.lower().split()))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        total = count_matching(db.session, Filters(list_id=weekly.id, status="active"), cap=3)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    counted = [s for s in seen if s.startswith("select count(")]
    if backend == "postgresql":
        assert (total.value, total.exact, counted) == (12, False, [])
        assert total.words == "about 12"
    else:  # no statistics to trust: counted to the cap and said as such
        assert (total.value, total.exact, len(counted)) == (None, False, 1)
        assert total.words == "more than 3"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_suppressed_peoples_lists_are_looked_up_by_person_in_one_index(app):
    """Each suppressed person's active lists come from the index (subscriber_id, status,
    list_id) alone, one lookup per person (migration 0016): at a million subscribers with
    10,000 suppressed, reading the rows or walking the active subscriptions cost 200 ms."""
    from broadside.audience.list_sizes import suppressed_per_list

    weekly = make_list(db.session, 6)
    db.session.execute(update(Subscriber).where(Subscriber.id.in_([2, 4])).values(suppression="bounced"))
    db.session.commit()
    executed: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        executed.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        assert suppressed_per_list(db.session, [weekly.id]) == {weekly.id: 2}
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    statement, params = next((s, p) for s, p in executed if "GROUP BY" in s)
    plan = [row[3] for row in db.session.connection().exec_driver_sql(
        "EXPLAIN QUERY PLAN " + statement, params)]
    assert any(step.startswith("SCAN") and "subscriptions" not in step for step in plan), plan
    assert [step for step in plan if "subscriptions" in step] == [
        "SEARCH subscriptions USING COVERING INDEX ix_subscriptions_person "
        "(subscriber_id=? AND status=?)"], plan


def test_suppressed_people_are_matched_with_the_lists_asked_for_alone(app):
    """Only the lists the dashboard counts exactly need their suppressed people: another list
    of the same suppressed person is not read (on PostgreSQL the join is restricted to those
    lists, so its cost follows their size and the suppressed people, never the other lists),
    and no list at all reads nothing. The counts are of active subscriptions only."""
    from broadside.audience.list_sizes import suppressed_per_list

    weekly = make_list(db.session, 6)
    offers = make_list(db.session, 0, name="Offers")
    # People 1-4 on Offers too, 3 of them no longer (unsubscribed); 2, 3 and 4 suppressed:
    # three on Weekly, two active on Offers.
    for person in (1, 2, 3, 4):
        db.session.add(Subscription(subscriber_id=person, list_id=offers.id,
                                    status="unsubscribed" if person == 3 else "active"))
    db.session.execute(update(Subscriber).where(Subscriber.id.in_([2, 3, 4]))
                       .values(suppression="bounced"))
    db.session.commit()
    assert suppressed_per_list(db.session, [weekly.id]) == {weekly.id: 3}
    assert suppressed_per_list(db.session, [offers.id]) == {offers.id: 2}
    assert suppressed_per_list(db.session, [weekly.id, offers.id]) == {weekly.id: 3, offers.id: 2}
    assert suppressed_per_list(db.session, [weekly.id], cap=2) is None  # 3 suppressed: more
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        assert suppressed_per_list(db.session, []) == {}
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert seen == []
