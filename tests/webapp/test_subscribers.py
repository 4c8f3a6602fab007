"""The subscriber table (search, filters, keyset pages, no-JS form and HTMX fragment) and the
subscriber page: add, edit, unsubscribe per list, block, erase."""

import re

import pytest
from sqlalchemy import func, select, text

from broadside.audience import lists as lists
from broadside.audience.subscribers import service
from broadside.audience.subscribers.search import Filters, search
from broadside.audience.subscribers.total import Total, count_exactly, count_matching
from broadside.audience.unsubscribe import suppression
from broadside.core.models import (
    Broadcast,
    Delivery,
    Event,
    Subscriber,
    Subscription,
    TransactionalMessage,
)
from tests.helpers import csrf_token_from
from webapp.extensions import db


def count(model) -> int:
    return db.session.scalar(select(func.count()).select_from(model))


def emails_on(html: str) -> list[str]:
    return re.findall(r'<a href="/subscribers/\d+">([^<]+)</a>', html)


@pytest.fixture
def people(app):
    weekly = lists.create_list(db.session, "Weekly")
    monthly = lists.create_list(db.session, "Monthly")
    for email, name, on in [
        ("ann@example.com", "Ann Archer", {weekly.id: "active"}),
        ("bob@example.org", "Bob Baker", {weekly.id: "unsubscribed", monthly.id: "active"}),
        ("anna_b@example.net", "Anna Bell", {monthly.id: "unconfirmed"}),
        ("carl@example.com", "Carl 100% Real", {}),
    ]:
        subscriber, _ = service.save_subscriber(db.session, email=email, name=name)
        for list_id, status in on.items():
            db.session.add(Subscription(subscriber_id=subscriber.id, list_id=list_id,
                                        status=status))
    db.session.commit()
    return {"weekly": weekly.id, "monthly": monthly.id}


def found(**kwargs) -> list[str]:
    return [row.subscriber.email for row in search(db.session, Filters.parse(**kwargs)).rows]


def test_search_by_prefix_and_substring_of_email_or_name(people):
    assert found(q="ann", match="prefix") == ["anna_b@example.net", "ann@example.com"]
    assert found(q="ANN@", match="prefix") == ["ann@example.com"]
    assert found(q="bell", match="prefix") == []
    assert found(q="bell") == ["anna_b@example.net"]  # "contains" is the default
    assert found(q="example.org", match="contains") == ["bob@example.org"]
    # LIKE wildcards in the search are taken literally.
    assert found(q="a_b", match="contains") == ["anna_b@example.net"]
    assert found(q="100%", match="contains") == ["carl@example.com"]
    assert found(q="%", match="prefix") == []


def test_hamilton_is_found_by_default_in_names_and_addresses(app):
    for email, name in [("ahamilton@example.com", ""), ("founder@example.org", "Alexander Hamilton"),
                        ("HAMILTON.Jo@Example.net", "Jo"), ("ham@example.com", "Milton"),
                        ("hamilton@example.org", "")]:
        service.save_subscriber(db.session, email=email, name=name)
    assert found(q="hamilton") == ["hamilton@example.org", "hamilton.jo@example.net",
                                   "founder@example.org", "ahamilton@example.com"]
    assert found(q="HAMILTON") == found(q="hamilton")
    assert found(q="Hamilton", match="prefix") == ["hamilton@example.org",
                                                    "hamilton.jo@example.net"]
    # An "@" means an address: names are not searched, and the prefix uses the index.
    assert found(q="hamilton@") == ["hamilton@example.org", "ahamilton@example.com"]
    assert found(q="hamilton@", match="prefix") == ["hamilton@example.org"]


def test_the_total_is_exact_up_to_the_cap_then_an_estimate_said_as_one(app, backend):
    for i in range(12):
        service.save_subscriber(db.session, email=f"p{i:02d}@example.com",
                                name="Alexander Hamilton" if i % 2 else "Reader")
    hamiltons = Filters.parse("hamilton")
    assert count_matching(db.session, Filters(), cap=12) == Total(12, True, 12)
    assert count_matching(db.session, hamiltons, cap=6) == Total(6, True, 6)
    assert count_matching(db.session, hamiltons, cap=6).words == "6"
    over, filtered = count_matching(db.session, Filters(), cap=11), \
        count_matching(db.session, hamiltons, cap=5)
    assert not over.exact and not filtered.exact
    if backend == "sqlite":
        assert over.words == "more than 11" and filtered.words == "more than 5"
    else:
        # PostgreSQL: the table's statistics for everyone, the planner's guess for a filter.
        db.session.execute(text("ANALYZE subscribers"))
        db.session.commit()
        assert count_matching(db.session, Filters(), cap=11).words == "about 12"
        guess = count_matching(db.session, Filters.parse("p", "prefix"), cap=5)
        assert not guess.exact and re.fullmatch(r"about \d+|more than 5", guess.words)
    assert count_exactly(db.session, hamiltons) == 6
    # One list (in one status) is counted on its subscriptions, the same way bounded.
    weekly = lists.create_list(db.session, "Weekly").id
    ids = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
    for n, sid in enumerate(ids[:7]):
        db.session.add(Subscription(subscriber_id=sid, list_id=weekly,
                                    status="unsubscribed" if n < 2 else "active"))
    db.session.commit()
    assert count_matching(db.session, Filters(list_id=weekly)) == Total(7, True)
    left = Filters(list_id=weekly, status="unsubscribed")
    assert count_matching(db.session, left) == Total(2, True)
    assert not count_matching(db.session, left, cap=1).exact
    assert count_matching(db.session, Filters(list_id=weekly, q="hamilton")) == Total(3, True)


def test_big_totals_are_rounded_in_words():
    assert Total(1_234_567, False).words == "about 1.2 million"
    assert Total(3_000_001, False).words == "about 3 million"
    assert Total(345_678, False).words == "about 350,000"
    assert Total(None, False).words == "more than 100,000"
    assert Total(99_000, False).words == "more than 100,000"  # an estimate below the cap
    assert Total(12_345, True).words == "12,345"


def test_filters_by_list_and_status(people):
    assert found(list_id=str(people["weekly"])) == ["bob@example.org", "ann@example.com"]
    assert found(list_id=str(people["weekly"]), status="active") == ["ann@example.com"]
    assert found(status="unconfirmed") == ["anna_b@example.net"]
    assert found(status="unsubscribed") == ["bob@example.org"]
    suppression.suppress(db.session, service.find_by_email(db.session, "carl@example.com").id,
                         "blocked")
    assert found(status="suppressed") == found(status="blocked") == ["carl@example.com"]
    assert found(status="nonsense", list_id="x") == found()


def test_keyset_pages_walk_every_row_once_both_ways(app):
    for i in range(12):
        service.save_subscriber(db.session, email=f"p{i:02d}@example.com")
    seen, before, pages = [], None, []
    while True:
        page = search(db.session, Filters(), before=before, page_size=5)
        pages.append(page)
        seen += [r.subscriber.email for r in page.rows]
        if page.next_before is None:
            break
        before = page.next_before
    assert seen == [f"p{i:02d}@example.com" for i in reversed(range(12))]
    assert [len(p.rows) for p in pages] == [5, 5, 2]
    back = search(db.session, Filters(), after=pages[2].prev_after, page_size=5)
    assert [r.subscriber.email for r in back.rows] == [r.subscriber.email for r in pages[1].rows]


def test_table_page_works_without_javascript_and_as_an_htmx_fragment(logged_in_client, people):
    page = logged_in_client.get("/subscribers/?q=ann&match=prefix")
    assert page.status_code == 200 and "<form" in page.text
    assert 'hx-trigger="input changed delay:300ms, search"' in page.text
    assert emails_on(page.text) == ["anna_b@example.net", "ann@example.com"]
    fragment = logged_in_client.get("/subscribers/?q=bob", headers={"HX-Request": "true"})
    # Only the results (with their selection form), not the search form or the page.
    assert "<html" not in fragment.text and 'id="subscriber-search"' not in fragment.text
    # The count is not in the table's answer: its own request follows (see test_subscriber_window).
    assert 'id="bulk-form"' in fragment.text and 'hx-get="/subscribers/total?q=bob"' in fragment.text
    assert emails_on(fragment.text) == ["bob@example.org"]
    assert 'hx-swap-oob="true"' in fragment.text and "export.csv?q=bob" in fragment.text
    # A history restore asks with HX-Request too, but needs the whole page.
    restore = logged_in_client.get("/subscribers/?q=bob", headers={
        "HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in restore.text
    assert "No subscribers match." in logged_in_client.get("/subscribers/?q=zzz").text


def test_pager_links_keep_the_filters(logged_in_client, app):
    for i in range(55):
        service.save_subscriber(db.session, email=f"p{i:02d}@example.com")
    page = logged_in_client.get("/subscribers/?q=p")
    assert len(emails_on(page.text)) == 50
    older = re.search(r'href="([^"]+)" rel="next"', page.text).group(1).replace("&amp;", "&")
    assert "q=p" in older and "before=" in older
    second = logged_in_client.get(older)
    assert len(emails_on(second.text)) == 5 and 'rel="prev"' in second.text


def test_add_then_edit_a_subscriber(logged_in_client, people):
    form = logged_in_client.get(f"/subscribers/new?list={people['weekly']}")
    token = csrf_token_from(form.text)
    response = logged_in_client.post("/subscribers/new", data={
        "email": " Dee@Example.COM ", "name": "Dee", "attributes": "plan = gold\ncity=Oslo",
        "lists": [str(people["weekly"])], "csrf_token": token,
    })
    assert response.status_code == 303
    dee = service.find_by_email(db.session, "dee@example.com")
    assert dee.attributes == {"plan": "gold", "city": "Oslo"}
    assert db.session.scalar(select(Subscription.status).where(
        Subscription.subscriber_id == dee.id)) == "active"
    bad = logged_in_client.post("/subscribers/new", data={"email": "nope", "csrf_token": token})
    assert bad.status_code == 422 and "not a valid email address" in bad.text

    edit = logged_in_client.get(f"/subscribers/{dee.id}/edit")
    assert "plan = gold" in edit.text
    taken = logged_in_client.post(f"/subscribers/{dee.id}/edit", data={
        "email": "ann@example.com", "name": "Dee", "csrf_token": token})
    assert taken.status_code == 422 and "already has the address" in taken.text
    saved = logged_in_client.post(f"/subscribers/{dee.id}/edit", data={
        "email": "dee@example.org", "name": "Dee D", "attributes": "plan = silver",
        "csrf_token": token})
    assert saved.status_code == 303
    db.session.expire_all()
    dee = db.session.get(Subscriber, dee.id)
    assert (dee.email, dee.name, dee.attributes) == ("dee@example.org", "Dee D", {"plan": "silver"})


def test_subscriber_page_shows_subscriptions_and_every_broadcast_with_its_outcome(
        logged_in_client, people):
    bob = service.find_by_email(db.session, "bob@example.org")
    service.unsubscribe(db.session, bob.id, people["monthly"], source="owner")
    for subject, status, reason in [("Spring news", "sent", None),
                                    ("Summer news", "failed", "550 5.1.1 No such user")]:
        broadcast = Broadcast(list_id=people["monthly"], status="sent", subject=subject)
        db.session.add(broadcast)
        db.session.flush()
        db.session.add(Delivery(broadcast_id=broadcast.id, subscriber_id=bob.id, status=status,
                                reason=reason))
    db.session.commit()
    page = logged_in_client.get(f"/subscribers/{bob.id}")
    assert page.status_code == 200
    assert "Spring news" in page.text and "Summer news" in page.text
    assert "550 5.1.1 No such user" in page.text
    assert "via owner" in page.text
    assert "<strong>unsubscribed</strong>, owner" in page.text


def test_unsubscribe_one_list_keeps_the_others(logged_in_client, people):
    bob = service.find_by_email(db.session, "bob@example.org")
    page = logged_in_client.get(f"/subscribers/{bob.id}")
    response = logged_in_client.post(
        f"/subscribers/{bob.id}/lists/{people['monthly']}/unsubscribe",
        data={"csrf_token": csrf_token_from(page.text)})
    assert response.status_code == 302
    rows = dict(db.session.execute(select(Subscription.list_id, Subscription.status).where(
        Subscription.subscriber_id == bob.id)).all())
    assert rows == {people["weekly"]: "unsubscribed", people["monthly"]: "unsubscribed"}
    sub = db.session.scalar(select(Subscription).where(
        Subscription.subscriber_id == bob.id, Subscription.list_id == people["monthly"]))
    assert sub.unsubscribe_source == "owner" and sub.unsubscribed_at is not None
    assert db.session.scalar(select(Event.kind).where(Event.subscriber_id == bob.id)) == \
        "unsubscribed"


def test_adding_to_a_list_never_reactivates_an_unsubscription(logged_in_client, people):
    bob = service.find_by_email(db.session, "bob@example.org")
    assert service.join_list(db.session, bob.id, people["weekly"]) is False
    assert db.session.scalar(select(Subscription.status).where(
        Subscription.subscriber_id == bob.id, Subscription.list_id == people["weekly"])) == \
        "unsubscribed"
    carl = service.find_by_email(db.session, "carl@example.com")
    page = logged_in_client.get(f"/subscribers/{carl.id}")
    logged_in_client.post(f"/subscribers/{carl.id}/lists", data={
        "list_id": str(people["weekly"]), "csrf_token": csrf_token_from(page.text)})
    assert db.session.scalar(select(Subscription.status).where(
        Subscription.subscriber_id == carl.id)) == "active"


def test_block_suppresses_for_every_list(logged_in_client, people):
    ann = service.find_by_email(db.session, "ann@example.com")
    page = logged_in_client.get(f"/subscribers/{ann.id}")
    logged_in_client.post(f"/subscribers/{ann.id}/suppress", data={
        "detail": "asked by phone", "csrf_token": csrf_token_from(page.text)})
    db.session.expire_all()
    ann = db.session.get(Subscriber, ann.id)
    assert (ann.suppression, ann.suppression_detail) == ("blocked", "asked by phone")
    assert ann.suppressed_at is not None
    shown = logged_in_client.get(f"/subscribers/{ann.id}")
    assert "Suppressed (blocked)" in shown.text and "Block from all lists" not in shown.text


def test_owner_blocking_a_bounced_subscriber_upgrades_to_blocked_with_an_event(logged_in_client,
                                                                              people):
    """One suppression rule for bounces and the owner's block: a block outranks a bounce."""
    ann = service.find_by_email(db.session, "ann@example.com")
    assert suppression.record_bounce(db.session, "ann@example.com", "hard", detail="550").suppressed
    page = logged_in_client.get(f"/subscribers/{ann.id}")
    assert "Suppressed (bounced)" in page.text and "Block from all lists" in page.text
    answer = logged_in_client.post(f"/subscribers/{ann.id}/suppress", data={
        "detail": "asked by phone", "csrf_token": csrf_token_from(page.text)}, follow_redirects=True)
    assert "Blocked: they will get no more mail from any list." in answer.text
    db.session.expire_all()
    ann = db.session.get(Subscriber, ann.id)
    assert (ann.suppression, ann.suppression_detail) == ("blocked", "asked by phone")
    [event] = db.session.scalars(
        select(Event).where(Event.subscriber_id == ann.id, Event.kind == "suppressed",
                            Event.detail.like("blocked:%"))).all()
    assert event.detail == "blocked: asked by phone" and event.data["kind"] == "blocked"
    # A complaint outranks the owner's block: blocking again changes nothing.
    suppression.record_complaint(db.session, "ann@example.com")
    assert not suppression.suppress(db.session, ann.id, "blocked", "again")
    assert db.session.get(Subscriber, ann.id).suppression == "complained"
    assert "Block from all lists" not in logged_in_client.get(f"/subscribers/{ann.id}").text


def test_erase_asks_first_then_deletes_the_person_and_their_history(logged_in_client, people):
    ann = service.find_by_email(db.session, "ann@example.com")
    ann_id = ann.id
    broadcast = Broadcast(list_id=people["weekly"], status="sent", subject="Hello")
    db.session.add(broadcast)
    db.session.flush()
    db.session.add(Delivery(broadcast_id=broadcast.id, subscriber_id=ann_id, status="sent"))
    db.session.add(TransactionalMessage(kind="confirmation", to_email="ann@example.com",
                                       subject="Confirm", subscriber_id=ann_id))
    service.unsubscribe(db.session, ann_id, people["weekly"])
    assert count(Event) == 1
    confirm = logged_in_client.get(f"/subscribers/{ann_id}/delete")
    assert "Erase everything about them" in confirm.text
    assert service.find_by_email(db.session, "ann@example.com") is not None  # GET changed nothing
    response = logged_in_client.post(f"/subscribers/{ann_id}/delete",
                                     data={"csrf_token": csrf_token_from(confirm.text)})
    assert response.status_code == 302
    assert db.session.get(Subscriber, ann_id) is None
    assert db.session.scalar(select(func.count()).select_from(Subscription).where(
        Subscription.subscriber_id == ann_id)) == 0
    assert count(Event) == 0
    assert count(TransactionalMessage) == 0
    delivery = db.session.scalar(select(Delivery))
    assert delivery.subscriber_id is None and delivery.status == "sent"
    assert "ann@example.com" not in emails_on(logged_in_client.get("/subscribers/").text)
    assert logged_in_client.get(f"/subscribers/{ann_id}").status_code == 404


def test_pages_for_an_unknown_subscriber_are_404(logged_in_client, app):
    for path in ("/subscribers/999", "/subscribers/999/edit", "/subscribers/999/delete"):
        assert logged_in_client.get(path).status_code == 404


def test_attributes_from_the_api_show_as_json_on_the_page(logged_in_client, app):
    subscriber, _ = service.save_subscriber(
        db.session, email="api@example.com", attributes={"age": 41, "tags": ["a", "<b>"]})
    page = logged_in_client.get(f"/subscribers/{subscriber.id}")
    assert "<td>41</td>" in page.text and '["a", "\\u003cb\\u003e"]' in page.text
