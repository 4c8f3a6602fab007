"""The deliveries table's keyset pages (at a million rows): read through the (broadcast_id,
status, id) index status by status, yet in id order across statuses, with no row skipped or
repeated while rows change status between the pages, forwards and backwards; the API's pages
likewise."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import select

from broadside.campaigns.broadcasts import evidence
from broadside.campaigns.broadcasts.ledger import Change, transition
from broadside.core.models import Delivery
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db


@pytest.fixture
def sending(app):
    broadcast = start_broadcast(app, make_list(db.session, 230), enqueue=False)
    return broadcast.id


def _move_some(broadcast_id: int, rng: random.Random, count: int) -> None:
    """Play the worker: claim some pending rows and settle some claimed ones, anywhere in the
    table (before and after the page being read), through the ledger."""
    pending = list(db.session.execute(select(Delivery.id, Delivery.subscriber_id).where(
        Delivery.broadcast_id == broadcast_id, Delivery.status == "pending")).all())
    claimed = list(db.session.execute(select(Delivery.id, Delivery.subscriber_id).where(
        Delivery.broadcast_id == broadcast_id, Delivery.status == "sending")).all())
    for rows, source, target in ((pending, "pending", "sending"),
                                 (claimed, "sending", rng.choice(["sent", "failed", "unknown"]))):
        picked = rng.sample(rows, min(count, len(rows)))
        transition(db.session, broadcast_id, [Change(i, s) for i, s in picked],
                   source=source, target=target)
    db.session.commit()


def test_forward_pages_see_every_row_once_while_rows_move(sending):
    rng = random.Random(19)
    every = list(db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == sending)
                                    .order_by(Delivery.id)))
    seen, after, pages = [], None, 0
    while True:
        page = evidence.delivery_page(db.session, sending, after=after, per_page=17)
        seen += [row.id for row in page.rows]
        pages += 1
        assert [row.id for row in page.rows] == sorted(row.id for row in page.rows)
        _move_some(sending, rng, 25)
        if not page.has_next:
            break
        after = page.last_id
    assert seen == every and pages == 14  # 230 rows / 17
    statuses = {row.status for row in evidence.delivery_page(db.session, sending, per_page=50).rows}
    assert len(statuses) > 2  # the rows really were in several statuses as the pages were read


def test_backward_pages_see_every_row_once_while_rows_move(sending):
    rng = random.Random(7)
    every = list(db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == sending)
                                    .order_by(Delivery.id)))
    seen, before = [], every[-1] + 1
    while True:
        page = evidence.delivery_page(db.session, sending, before=before, per_page=20)
        assert [row.id for row in page.rows] == sorted(row.id for row in page.rows)
        seen = [row.id for row in page.rows] + seen
        _move_some(sending, rng, 30)
        if not page.has_prev:
            break
        before = page.first_id
    assert seen == every


def test_a_status_filter_pages_through_its_own_rows(sending):
    _move_some(sending, random.Random(3), 120)
    sent = list(db.session.scalars(select(Delivery.id).where(
        Delivery.broadcast_id == sending, Delivery.status == "sending").order_by(Delivery.id)))
    seen, after = [], None
    while True:
        page = evidence.delivery_page(db.session, sending, status="sending", after=after, per_page=30)
        seen += [row.id for row in page.rows]
        if not page.has_next:
            break
        after = page.last_id
    assert seen == sent and sent


def test_the_pages_over_http_and_the_api_agree(logged_in_client, client, api_headers, sending):
    first = logged_in_client.get(f"/broadcasts/{sending}/deliveries?per_page=5",
                                 headers={"HX-Request": "true"})
    assert first.status_code == 200
    ids = list(db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == sending)
                                  .order_by(Delivery.id).limit(5)))
    for delivery_id in ids:
        assert f"/deliveries/{delivery_id}" in first.text
    middle = logged_in_client.get(f"/broadcasts/{sending}/deliveries?after={ids[-1]}&per_page=5")
    assert middle.status_code == 200 and f"/deliveries/{ids[-1] + 1}" in middle.text
    rng, seen, after = random.Random(5), [], 0
    while True:  # the API's keyset pages, rows moving between them
        api = client.get(f"/api/broadcasts/{sending}/deliveries?limit=40&after={after}",
                         headers=api_headers)
        assert api.status_code == 200
        if not api.json:
            break
        seen += [row["id"] for row in api.json]
        after = api.json[-1]["id"]
        _move_some(sending, rng, 20)
    assert seen == list(db.session.scalars(select(Delivery.id).where(
        Delivery.broadcast_id == sending).order_by(Delivery.id)))


def _search_all(broadcast_id: int, term: str, *, status: str | None = None) -> tuple[list[int], int]:
    """Every id a search finds, following "search the next" and "Next" to the end."""
    seen, requests, after = [], 0, None
    while True:
        page = evidence.delivery_page(db.session, broadcast_id, query=term, status=status,
                                      after=after, per_page=3)
        requests += 1
        seen += [row.id for row in page.rows]
        if page.has_next:
            after = page.last_id
        elif page.searched_to is not None:
            assert not page.searched_back
            after = page.searched_to
        else:
            return seen, requests


def test_a_search_examines_a_window_of_deliveries_and_searches_on(monkeypatch, sending):
    """A search by address (a LIKE no index serves) reads at most SEARCH_WINDOW deliveries
    per request; the page says where it stopped, and searching on finds every match once."""
    monkeypatch.setattr(evidence, "SEARCH_WINDOW", 40)
    all_ids = db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == sending)
                                 .order_by(Delivery.id)).all()
    # reader00007, 00017, ... 00227: 23 matches spread over all 230 rows (six windows).
    expected = [i for i, n in zip(all_ids, range(230), strict=True) if n % 10 == 7]
    found, requests = _search_all(sending, "7@")
    assert found == expected
    assert requests > 230 // 40  # it went window by window, never all at once
    first = evidence.delivery_page(db.session, sending, query="00229@")
    assert first.rows == [] and first.searched_to == all_ids[0] - 1 + 40
    # The last match, from the window that holds it; nothing is found twice going back.
    last = evidence.delivery_page(db.session, sending, query="00229@", after=all_ids[-1] - 10)
    assert [r.id for r in last.rows] == [all_ids[-1]] and last.searched_to is None
    back = evidence.delivery_page(db.session, sending, query="7@", before=all_ids[-1] + 1)
    assert back.searched_back and back.searched_to is not None
    assert [r.id for r in back.rows] == [i for i in expected if i > all_ids[-1] - 41]


def test_the_deliveries_page_says_where_a_search_stopped(monkeypatch, logged_in_client, sending):
    monkeypatch.setattr(evidence, "SEARCH_WINDOW", 40)
    page = logged_in_client.get(f"/broadcasts/{sending}/deliveries?q=00200%40",
                                headers={"HX-Request": "true"})
    assert page.status_code == 200
    assert "looks through 40 deliveries at a time, and found nobody among them" in page.text
    assert 'id="delivery-search-further"' in page.text and "No delivery matches among these." in page.text
    plain = logged_in_client.get(f"/broadcasts/{sending}/deliveries?q=reader&per_page=20")
    assert "looks through" not in plain.text  # a page filled by the window says nothing


def test_a_whole_address_is_found_at_once_wherever_its_delivery_lies(monkeypatch, logged_in_client,
                                                                     sending):
    """The window bounds the scan, never an exact lookup: an address pasted whole (say from a
    complaint) finds its person's delivery through the unique indexes when the first window
    found nobody, and the page says how it was found and still offers the next window."""
    monkeypatch.setattr(evidence, "SEARCH_WINDOW", 40)
    all_ids = db.session.scalars(select(Delivery.id).where(Delivery.broadcast_id == sending)
                                 .order_by(Delivery.id)).all()
    page = evidence.delivery_page(db.session, sending, query=" Reader00200@Example.com ")
    assert [r.id for r in page.rows] == [all_ids[200]] and page.whole_address
    assert page.searched_to == all_ids[0] - 1 + 40  # substring matches: still window by window
    assert [r.id for r in evidence.delivery_page(db.session, sending, query="reader00200@example.com",
                                                 status="pending").rows] == [all_ids[200]]
    for query, status, after in (("reader00200@example.com", "sent", None),  # not in that status
                                 ("reader00200@example", None, None),  # not a whole address
                                 ("nobody@example.com", None, None),  # not in this broadcast
                                 ("reader00200@example.com", None, all_ids[40])):  # a later window
        found = evidence.delivery_page(db.session, sending, query=query, status=status, after=after)
        assert not found.whole_address
        assert found.rows == [] or after is not None  # the later window holds it by its LIKE
    answer = logged_in_client.get(f"/broadcasts/{sending}/deliveries?q=reader00200%40example.com",
                                  headers={"HX-Request": "true"})
    assert answer.status_code == 200 and f'id="delivery-{all_ids[200]}"' in answer.text
    assert "Found by its whole address" in answer.text and 'id="delivery-search-further"' in answer.text


@pytest.mark.parametrize("span", [evidence.SPAN_PER_DELIVERY, 0])
def test_a_search_finds_the_same_rows_however_it_reads_the_people(monkeypatch, sending, backend, span):
    """On PostgreSQL a search looks the PROBE deliveries nearest its key up one by one and
    reads the rest of its window's people as a range of subscriber ids (or, when that range is
    wide, one by one too): the pages are the ones a plain read of the window gives, forwards,
    backwards and within a status, a term matching many, a few, one or none."""
    from sqlalchemy import event

    from broadside.core.models import Subscriber

    monkeypatch.setattr(evidence, "SEARCH_WINDOW", 40)
    monkeypatch.setattr(evidence, "PROBE", 7)
    monkeypatch.setattr(evidence, "SPAN_PER_DELIVERY", span)
    _move_some(sending, random.Random(11), 60)
    rows = db.session.execute(select(Delivery.id, Subscriber.email, Delivery.status).join(
        Subscriber, Subscriber.id == Delivery.subscriber_id).where(
        Delivery.broadcast_id == sending).order_by(Delivery.id)).all()
    statements: list[str] = []
    record = lambda conn, cursor, statement, *args: statements.append(statement)  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", record)
    try:
        for term in ("reader", "7@", "00229@", "nobody"):
            assert _search_all(sending, term)[0] == [i for i, email, _ in rows if term in email]
        found, _ = _search_all(sending, "1", status="sending")
        assert found == [i for i, email, status in rows if "1" in email and status == "sending"]
        # Backwards from past the last delivery: the last matches of the window below it.
        before = rows[-1][0] + 1
        back = evidence.delivery_page(db.session, sending, query="3", before=before, per_page=5)
        assert [r.id for r in back.rows] == [
            i for i, email, _ in rows if "3" in email and i > before - 41][-5:]
        assert all("3" in (r.email or "") for r in back.rows)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    by_range = [s for s in statements if "BETWEEN" in s]
    if backend == "postgresql" and span:
        assert by_range  # the rare terms read the windows' people by range
    else:
        assert by_range == []
