"""The subscriber table at scale (a million subscribers): the total in its own request, and a
filtered search that examines a bounded window of ids and says what it searched.

The window is made small here (SCAN_WINDOW patched to 10) so 35 people span four windows.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import insert

from broadside.audience import lists as lists
from broadside.audience.subscribers import search
from broadside.audience.subscribers.search import Filters
from broadside.audience.subscribers.total import Total, count_matching
from broadside.core.models import Subscriber, Subscription
from webapp.extensions import db


def emails_on(html: str) -> list[str]:
    return re.findall(r'<a href="/subscribers/\d+">([^<]+)</a>', html)


@pytest.fixture
def crowd(app, monkeypatch):
    """35 people, ids ascending with the number in their address: "rare" only in #3, "odd"
    in the odd ones; all on Weekly."""
    monkeypatch.setattr(search, "SCAN_WINDOW", 10)
    weekly = lists.create_list(db.session, "Weekly")
    db.session.execute(insert(Subscriber), [
        {"email": f"p{i:02d}{'.rare' if i == 3 else ''}{'.odd' if i % 2 else ''}@example.com",
         "name": f"Person {i}", "attributes": {}} for i in range(1, 36)])
    db.session.flush()
    ids = [s.id for s in db.session.query(Subscriber).order_by(Subscriber.id)]
    db.session.execute(insert(Subscription), [
        {"subscriber_id": i, "list_id": weekly.id, "status": "active"} for i in ids])
    db.session.commit()
    return ids


def test_a_common_match_fills_its_page_without_saying_anything(crowd):
    page = search.search(db.session, Filters.parse("odd"), page_size=3)
    assert [r.subscriber.email for r in page.rows] == [
        "p35.odd@example.com", "p33.odd@example.com", "p31.odd@example.com"]
    assert page.searched_to is None and page.next_before == crowd[30]


def test_a_rare_match_is_found_by_searching_further_window_by_window(crowd):
    seen, before, steps = [], None, 0
    while True:
        page = search.search(db.session, Filters.parse("rare"), before=before)
        steps += 1
        seen += [r.subscriber.email for r in page.rows]
        if page.searched_to is None:
            break
        # Each request examined at most the window: ids in [searched_to, before).
        top = before if before is not None else crowd[-1] + 1
        assert top - page.searched_to == 10
        before = page.searched_to
    assert seen == ["p03.rare.odd@example.com"] and steps == 4


def test_no_match_ends_when_the_oldest_were_searched(crowd):
    first = search.search(db.session, Filters.parse("zzz"))
    assert first.rows == [] and first.searched_to == crowd[-1] + 1 - 10
    last = search.search(db.session, Filters.parse("zzz"), before=crowd[4] + 1)
    assert last.rows == [] and last.searched_to is None  # nothing older is left


def test_an_address_prefix_is_served_by_the_index_and_not_windowed(crowd):
    page = search.search(db.session, Filters.parse("p03.rare.odd@", "prefix"))
    assert [r.subscriber.email for r in page.rows] == ["p03.rare.odd@example.com"]
    assert page.searched_to is None
    # Without an "@" it may be a name too (a scan): windowed like "contains".
    assert search.search(db.session, Filters.parse("p03.", "prefix")).searched_to == crowd[-1] + 1 - 10


def test_the_page_says_what_it_searched_and_links_further(logged_in_client, crowd):
    page = logged_in_client.get("/subscribers/?q=rare", headers={"HX-Request": "true"})
    assert emails_on(page.text) == [] and 'id="search-window"' in page.text
    assert "looks through 10 people at a time, newest first, and found nobody" in page.text
    link = re.search(r'href="([^"]+)" id="search-further"', page.text).group(1).replace("&amp;", "&")
    assert f"before={crowd[-1] + 1 - 10}" in link and "q=rare" in link
    while "search-further" in page.text and not emails_on(page.text):
        link = re.search(r'href="([^"]+)" id="search-further"', page.text).group(1).replace("&amp;", "&")
        page = logged_in_client.get(link)
    assert emails_on(page.text) == ["p03.rare.odd@example.com"]
    assert 'id="search-window"' not in page.text  # the oldest were searched: nothing to add
    some = logged_in_client.get("/subscribers/?q=odd")
    assert len(emails_on(some.text)) == 5
    assert "this page shows the 5 found among them" in some.text and "Search the next 10" in some.text


def test_the_total_is_its_own_request_for_htmx_and_without_javascript(logged_in_client, crowd):
    table = logged_in_client.get("/subscribers/?q=odd", headers={"HX-Request": "true"})
    assert 'hx-get="/subscribers/total?q=odd" hx-trigger="load"' in table.text
    assert "Counting" in table.text and "<noscript>" in table.text
    fragment = logged_in_client.get("/subscribers/total?q=odd", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text
    # A windowed filter is counted among the newest ids only, and says so.
    assert "<strong>At least 5</strong> match: 5 among the newest 10 subscribers" in fragment.text
    everyone = logged_in_client.get("/subscribers/total", headers={"HX-Request": "true"})
    assert "<strong>35</strong> subscribers" in everyone.text
    page = logged_in_client.get("/subscribers/total?q=p03.rare.odd%40&match=prefix")
    assert "<html" in page.text and "<strong>1</strong> subscriber match" in page.text
    assert 'href="/subscribers/?q=p03.rare.odd@&amp;match=prefix"' in page.text
    bad = logged_in_client.get("/subscribers/total?list=nope&status=%3Cx%3E&q=" + "a" * 500)
    assert bad.status_code == 200  # tolerant parsing: unknown filters mean none


def test_the_total_of_a_list_is_counted_on_its_index_not_windowed(crowd):
    weekly = db.session.scalar(db.select(Subscription.list_id).limit(1))
    assert count_matching(db.session, Filters(list_id=weekly), window=0) == Total(35, True)
    assert count_matching(db.session, Filters.parse("odd"), window=0) == Total(5, True, window=10)
    assert count_matching(db.session, Filters.parse("odd")) == Total(18, True)  # no window asked


def test_a_whole_address_is_found_at_once_wherever_it_lies(logged_in_client, crowd):
    # p03 is in the oldest window: "contains" with the whole address finds them through the
    # unique index (what an owner pastes to find one person), and says the window's search
    # can still go further for anyone else matching.
    page = search.search(db.session, Filters.parse("P03.rare.odd@example.com"))
    assert [r.subscriber.email for r in page.rows] == ["p03.rare.odd@example.com"]
    assert page.searched_to is not None
    # The other filters still apply to that lookup.
    unsubscribed = Filters.parse("p03.rare.odd@example.com", status="unsubscribed")
    assert search.search(db.session, unsubscribed).rows == []
    # A fragment is no whole address: the window alone, which holds nobody.
    assert search.search(db.session, Filters.parse("p03.rare.odd@example")).rows == []
    response = logged_in_client.get("/subscribers/?q=p03.rare.odd%40example.com")
    assert response.status_code == 200
    assert emails_on(response.get_data(as_text=True)) == ["p03.rare.odd@example.com"]
