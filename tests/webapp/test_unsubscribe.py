"""The unsubscribe link: GET asks, POST (button or RFC 8058 one-click) leaves, undo rejoins.

Several tests go through real HTTP against the running app (urllib, no cookie jar), the way a
mail client's one-click POST arrives.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from urllib.error import HTTPError

from sqlalchemy import func, select

from broadside.core.models import Broadcast, Event, MailingList, Subscriber, Subscription
from broadside.core.timeutil import utcnow
from tests.helpers import make_token, unsubscribe_url
from tests.own_apps import own_app
from webapp.extensions import db

ONE_CLICK = b"List-Unsubscribe=One-Click"


# ------------------------------------------------------------------ test data (plain inserts)

def add_list(name: str = "Weekly Notes", description: str = "") -> int:
    mailing_list = MailingList(name=name, description=description)
    db.session.add(mailing_list)
    db.session.commit()
    return mailing_list.id


def add_subscriber(email: str, lists: dict[int, str] | None = None, **fields) -> int:
    subscriber = Subscriber(email=email, **fields)
    db.session.add(subscriber)
    db.session.flush()
    for list_id, status in (lists or {}).items():
        db.session.add(Subscription(
            subscriber_id=subscriber.id, list_id=list_id, status=status,
            confirmed_at=utcnow() if status == "active" else None,
        ))
    db.session.commit()
    return subscriber.id


def add_broadcast(list_id: int | None, **fields) -> int:
    broadcast = Broadcast(list_id=list_id, subject="Hello", status="sending", **fields)
    db.session.add(broadcast)
    db.session.commit()
    return broadcast.id


def subscription(subscriber_id: int, list_id: int) -> Subscription:
    db.session.rollback()  # see what other connections (the live server) committed
    return db.session.scalars(select(Subscription).where(
        Subscription.subscriber_id == subscriber_id, Subscription.list_id == list_id
    )).one()


def events(kind: str | None = None, subscriber_id: int | None = None) -> list[Event]:
    db.session.rollback()
    query = select(Event).order_by(Event.id)
    if kind:
        query = query.where(Event.kind == kind)
    if subscriber_id:
        query = query.where(Event.subscriber_id == subscriber_id)
    return list(db.session.scalars(query))


def event_count() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Event))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect surfaces as an HTTPError with its 3xx code


def http(method: str, url: str, data: bytes | None = None, headers: dict | None = None):
    """Plain HTTP, no cookie jar, no redirect following: (status, headers, text)."""
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=15) as response:
            return response.status, response.headers, response.read().decode()
    except HTTPError as error:
        with error:
            return error.code, error.headers, error.read().decode()


def one_click(url: str):
    return http("POST", url, ONE_CLICK, {"Content-Type": "application/x-www-form-urlencoded"})


# ------------------------------------------------------------------ GET asks, changes nothing

def test_get_shows_confirmation_without_cookie_or_script_and_changes_nothing(app, live_server):
    weekly = add_list("Weekly Notes")
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    url = live_server.url + "/u/" + make_token(alice, weekly)

    for _ in range(2):  # a mail scanner, then a link previewer
        status, headers, text = http("GET", url)
        assert status == 200
        # The heading, read without its markup (the address sits on a line of its own).
        assert "Unsubscribe alice@example.com from Weekly Notes?" in re.sub(r"<[^>]+>", "", text)
        assert "Set-Cookie" not in headers
        assert "<script" not in text
        assert headers["Cache-Control"] == "no-store"
    assert subscription(alice, weekly).status == "active"
    assert event_count() == 0


def test_get_of_an_already_unsubscribed_link_says_so_and_offers_rejoin(client):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "unsubscribed"})
    response = client.get("/u/" + make_token(alice, weekly))
    assert response.status_code == 200
    assert "You are already unsubscribed" in response.text
    assert "Resubscribe to Weekly Notes" in response.text
    assert subscription(alice, weekly).status == "unsubscribed"


# ------------------------------------------------------------------ POST leaves

def test_one_click_post_without_cookies_unsubscribes_over_real_http(app, live_server):
    weekly = add_list("Weekly Notes")
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    broadcast = add_broadcast(weekly)
    url = unsubscribe_url(make_token(alice, weekly, broadcast), base_url=live_server.url)

    status, headers, text = one_click(url)

    assert status == 200  # never a redirect: mail clients do not follow them
    assert "You are unsubscribed" in text
    assert "Undo: resubscribe me" in text
    assert "/preferences" in text
    assert "Set-Cookie" not in headers
    row = subscription(alice, weekly)
    assert row.status == "unsubscribed"
    assert row.unsubscribe_source == "one-click"
    assert row.unsubscribed_at is not None
    [event] = events("unsubscribed")
    assert (event.subscriber_id, event.list_id, event.broadcast_id) == (alice, weekly, broadcast)
    assert event.detail == "one-click"


def test_one_click_post_as_multipart_form_data_works_too(client):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    response = client.post(
        "/u/" + make_token(alice, weekly), data={"List-Unsubscribe": "One-Click"},
        content_type="multipart/form-data",
    )
    assert response.status_code == 200
    assert subscription(alice, weekly).unsubscribe_source == "one-click"


def test_the_page_button_unsubscribes_and_records_link_as_the_source(client):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    response = client.post("/u/" + make_token(alice, weekly))
    assert response.status_code == 200
    assert "You are unsubscribed" in response.text
    assert "Set-Cookie" not in response.headers
    assert subscription(alice, weekly).unsubscribe_source == "link"
    assert [e.detail for e in events("unsubscribed")] == ["link"]


def test_second_post_answers_the_same_and_records_nothing_new(app, live_server):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    url = live_server.url + "/u/" + make_token(alice, weekly)

    first = one_click(url)
    left_at = subscription(alice, weekly).unsubscribed_at
    second = one_click(url)

    assert first[0] == second[0] == 200
    assert "You are unsubscribed" in second[2]
    assert subscription(alice, weekly).unsubscribed_at == left_at
    assert len(events("unsubscribed")) == 1


def test_concurrent_one_click_posts_record_one_unsubscribe(app, live_server):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    url = live_server.url + "/u/" + make_token(alice, weekly)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(one_click(url)[0])) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == [200] * 6
    assert len(events("unsubscribed")) == 1


def test_token_for_a_deleted_broadcast_still_unsubscribes(client):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    response = client.post("/u/" + make_token(alice, weekly, 987654), data=ONE_CLICK,
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 200
    [event] = events("unsubscribed")
    assert event.broadcast_id is None and event.data["broadcast_id"] == 987654


def test_undo_resubscribes_and_records_it(client):
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    token = make_token(alice, weekly)
    client.post("/u/" + token)

    response = client.post(f"/u/{token}/resubscribe")

    assert response.status_code == 200
    assert "You are subscribed again" in response.text
    row = subscription(alice, weekly)
    assert (row.status, row.unsubscribed_at, row.unsubscribe_source) == ("active", None, None)
    assert [e.kind for e in events(subscriber_id=alice)] == ["unsubscribed", "resubscribed"]
    # Undo twice changes nothing more.
    client.post(f"/u/{token}/resubscribe")
    assert len(events("resubscribed")) == 1


def test_undo_never_activates_a_subscription_that_did_not_leave(client):
    weekly = add_list()
    bob = add_subscriber("bob@example.com", {weekly: "unconfirmed"})
    response = client.post(f"/u/{make_token(bob, weekly)}/resubscribe")
    assert response.status_code == 200
    assert subscription(bob, weekly).status == "unconfirmed"
    assert event_count() == 0


# ------------------------------------------------------------------ a token names one list

def test_token_for_list_a_cannot_unsubscribe_from_list_b(app, live_server):
    list_a, list_b = add_list("A"), add_list("B")
    alice = add_subscriber("alice@example.com", {list_a: "active", list_b: "active"})
    token_a = make_token(alice, list_a)

    assert one_click(f"{live_server.url}/u/{token_a}")[0] == 200

    assert subscription(alice, list_a).status == "unsubscribed"
    assert subscription(alice, list_b).status == "active"
    # A token for list B made without the secret key is refused.
    forged = make_token(alice, list_b, secret_key="not-the-secret-key-at-all")
    assert one_click(f"{live_server.url}/u/{forged}")[0] == 400
    # Splicing the payload of another token onto a valid signature fails too.
    token_b = make_token(alice, list_b)
    spliced = token_b.split(".")[0] + "." + token_a.split(".")[1]
    assert one_click(f"{live_server.url}/u/{spliced}")[0] == 400
    assert subscription(alice, list_b).status == "active"


# ------------------------------------------------------------------ bad links

def _bad_tokens(good: str) -> list[str]:
    return [
        good[:-3],                                   # truncated signature
        good[: len(good) // 2],                      # truncated in the middle
        # tampered signature (not its last character, whose low bits base64 may ignore)
        good[:-5] + ("A" if good[-5] != "A" else "B") + good[-4:],
        "X" + good[1:],                               # tampered payload
        "garbage",
        "a" * 600,                                    # absurdly long
    ]


def test_tampered_truncated_or_garbage_tokens_get_a_friendly_400_and_change_nothing(
    app, live_server
):
    app.config["UNSUBSCRIBE_BAD_TOKEN_LIMIT"] = 100  # this test makes 24 bad requests
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    for bad in _bad_tokens(make_token(alice, weekly)):
        for method, path, data in (("GET", "", None), ("POST", "", ONE_CLICK),
                                   ("POST", "/resubscribe", b""), ("GET", "/preferences", None)):
            status, headers, text = http(method, f"{live_server.url}/u/{bad}{path}", data)
            assert status == 400, (bad, method, path)
            assert "This link does not work" in text
            assert "alice@example.com" not in text
            assert "Set-Cookie" not in headers
    assert subscription(alice, weekly).status == "active"
    assert event_count() == 0


def test_tokens_for_an_erased_subscriber_say_so_and_a_deleted_list_gets_the_broken_link_page(client):
    weekly, daily = add_list("Weekly"), add_list("Daily")
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    carol = add_subscriber("carol@example.com", {daily: "active"})
    erased_token, deleted_list_token = make_token(alice, weekly), make_token(carol, daily)
    never_on_list = make_token(carol, weekly)
    db.session.delete(db.session.get(Subscriber, alice))
    db.session.delete(db.session.get(MailingList, daily))
    db.session.commit()

    def bodies(*tokens: str) -> set[str]:
        seen = set()
        for token in tokens:
            for response in (client.get(f"/u/{token}"), client.post(f"/u/{token}", data=ONE_CLICK),
                             client.get(f"/u/{token}/preferences")):
                assert response.status_code == 404
                assert "Set-Cookie" not in response.headers
                seen.add(response.text)
        return seen

    # The person is gone (erased, or never was): their link says so plainly, the same page
    # whoever it named.
    [gone] = bodies(erased_token, make_token(424242, weekly))
    assert "This address is no longer on our lists" in gone and "@" not in gone
    # The person is there but not on the link's list: nothing to learn about which part is gone.
    [broken] = bodies(deleted_list_token, never_on_list)
    assert "This link does not work" in broken and "carol" not in broken
    assert event_count() == 0


# ------------------------------------------------------------------ rate limits

def test_bad_tokens_are_throttled_per_ip_but_a_real_one_click_still_works(app, live_server):
    app.config["UNSUBSCRIBE_BAD_TOKEN_LIMIT"] = 3  # read per request
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})

    statuses = [http("GET", f"{live_server.url}/u/garbage{i}")[0] for i in range(5)]
    assert statuses == [400, 400, 400, 429, 429]

    status, _, text = one_click(f"{live_server.url}/u/{make_token(alice, weekly)}")
    assert status == 200 and "You are unsubscribed" in text


def test_valid_links_are_throttled_per_ip_at_the_configured_rate(app, client):
    app.config["UNSUBSCRIBE_IP_LIMIT"] = 4
    weekly = add_list()
    alice = add_subscriber("alice@example.com", {weekly: "active"})
    url = "/u/" + make_token(alice, weekly)
    statuses = [client.get(url).status_code for _ in range(6)]
    assert statuses == [200, 200, 200, 200, 429, 429]
    refused = client.get(url)
    assert refused.headers["Retry-After"] == "60"
    assert "Too many requests" in refused.text


def test_unsubscribe_still_works_when_redis_is_down(app_config):

    with own_app({**app_config, "REDIS_URL": "redis://127.0.0.1:1/0"}) as app:
        weekly = add_list()
        alice = add_subscriber("alice@example.com", {weekly: "active"})
        response = app.test_client().post("/u/" + make_token(alice, weekly), data=ONE_CLICK,
                                          content_type="application/x-www-form-urlencoded")
        assert response.status_code == 200
        assert subscription(alice, weekly).status == "unsubscribed"
