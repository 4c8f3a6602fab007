"""The preferences page reached from the same token: every list, leave or rejoin, leave all."""

from __future__ import annotations

import re

from tests.helpers import make_token
from tests.webapp.test_unsubscribe import (
    add_list,
    add_subscriber,
    event_count,
    events,
    http,
    subscription,
)


def _people():
    weekly = add_list("Weekly Notes", "Every Friday")
    daily = add_list("Daily Digest")
    launches = add_list("Launches")
    elsewhere = add_list("Someone else's list")
    alice = add_subscriber("alice@example.com",
                           {weekly: "active", daily: "unsubscribed", launches: "unconfirmed"})
    bob = add_subscriber("bob@example.com", {elsewhere: "active", weekly: "active"})
    return alice, bob, weekly, daily, launches, elsewhere


def test_preferences_page_shows_every_list_of_this_person_and_changes_nothing(app, live_server):
    alice, _bob, weekly, *_ = _people()
    url = f"{live_server.url}/u/{make_token(alice, weekly)}/preferences"
    status, headers, text = http("GET", url)
    assert status == 200
    assert "Set-Cookie" not in headers and "<script" not in text
    assert "alice@example.com" in text
    for name in ("Weekly Notes", "Every Friday", "Daily Digest", "Launches"):
        assert name in text
    assert "Someone else" not in text and "bob@example.com" not in text
    assert 'aria-label="Leave Weekly Notes"' in text
    assert 'aria-label="Rejoin Daily Digest"' in text
    assert 'aria-label="Leave Launches"' in text
    assert event_count() == 0


def _post(url: str, **fields: str):
    body = "&".join(f"{k}={v}" for k, v in fields.items()).encode()
    return http("POST", url, body, {"Content-Type": "application/x-www-form-urlencoded"})


def test_leave_and_rejoin_each_list_over_real_http(app, live_server):
    alice, _bob, weekly, daily, _launches, _ = _people()
    url = f"{live_server.url}/u/{make_token(alice, weekly)}/preferences"

    status, _, text = _post(url, action="rejoin", list_id=str(daily))
    assert status == 200 and "You are subscribed to Daily Digest again." in text
    assert subscription(alice, daily).status == "active"
    assert subscription(alice, daily).confirmed_at is not None

    status, _, text = _post(url, action="leave", list_id=str(weekly))
    assert status == 200 and "You have left Weekly Notes." in text
    left = subscription(alice, weekly)
    assert (left.status, left.unsubscribe_source) == ("unsubscribed", "preferences")
    assert [(e.kind, e.list_id, e.detail) for e in events(subscriber_id=alice)] == [
        ("resubscribed", daily, "preferences"), ("unsubscribed", weekly, "preferences"),
    ]


def test_leave_everything_leaves_every_list_once(client):
    alice, bob, weekly, daily, launches, elsewhere = _people()
    url = f"/u/{make_token(alice, weekly)}/preferences"

    response = client.post(url, data={"action": "leave_all"})

    assert response.status_code == 200
    assert "You have left every list." in response.text
    assert "You are not on any list" in response.text
    for list_id in (weekly, daily, launches):
        assert subscription(alice, list_id).status == "unsubscribed"
    # Daily was already left: only the two that changed are recorded.
    assert sorted(e.list_id for e in events("unsubscribed")) == sorted([weekly, launches])
    # Bob is untouched.
    assert subscription(bob, weekly).status == "active"
    assert subscription(bob, elsewhere).status == "active"
    again = client.post(url, data={"action": "leave_all"})
    assert again.status_code == 200 and len(events("unsubscribed")) == 2


def test_preferences_cannot_touch_a_list_this_person_is_not_on(client):
    alice, bob, weekly, _daily, _launches, elsewhere = _people()
    url = f"/u/{make_token(alice, weekly)}/preferences"
    for data in ({"action": "leave", "list_id": str(elsewhere)},
                 {"action": "leave", "list_id": "999999"},
                 {"action": "leave", "list_id": "nope"},
                 {"action": "explode", "list_id": str(weekly)},
                 {}):
        response = client.post(url, data=data)
        assert response.status_code == 422, data
        assert 'role="alert"' in response.text
    assert subscription(bob, elsewhere).status == "active"
    assert subscription(alice, weekly).status == "active"
    assert event_count() == 0


def test_rejoin_only_by_their_own_action_and_only_for_a_list_they_left(client):
    alice, _bob, weekly, _daily, launches, _ = _people()
    url = f"/u/{make_token(alice, weekly)}/preferences"
    # An unconfirmed subscription is not activated by "rejoin": it never left.
    response = client.post(url, data={"action": "rejoin", "list_id": str(launches)})
    assert response.status_code == 200
    assert subscription(alice, launches).status == "unconfirmed"
    # Viewing the page (even many times) never rejoins anything.
    for _ in range(3):
        client.get(url)
    assert event_count() == 0


def test_preferences_link_is_on_the_confirmation_and_done_pages(client):
    alice, _bob, weekly, *_ = _people()
    token = make_token(alice, weekly)
    for response in (client.get(f"/u/{token}"), client.post(f"/u/{token}")):
        assert re.search(rf'href="/u/{re.escape(token)}/preferences"', response.text)
