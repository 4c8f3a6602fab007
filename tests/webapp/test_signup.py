"""Double opt-in sign-up: the public form, the confirmation email and link, and the guards
(one email per address per list per 10 minutes, honeypot, per-IP throttle, same answer for
everyone, nobody re-activated without their own click)."""

import re
import time
from datetime import timedelta

import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer
from sqlalchemy import func, select

from broadside.audience import lists as lists
from broadside.audience import signup as signup
from broadside.audience.subscribers import service as subscribers
from broadside.audience.unsubscribe import suppression
from broadside.core.models import Event, Subscriber, Subscription, TransactionalMessage
from tests.helpers import SECRET_KEY
from webapp.extensions import db


@pytest.fixture
def weekly(app):
    return lists.create_list(db.session, "Weekly", "Fridays", signup_enabled=True).id


def count(model) -> int:
    return db.session.scalar(select(func.count()).select_from(model))


def join(client, list_id, email, name="", ip="198.51.100.7", **extra):
    """The sign-up form sent, and its redirect followed (a success lands on "Check your
    inbox" by 303, so a reload asks nothing again)."""
    return client.post(f"/join/{list_id}", data={"email": email, "name": name, **extra},
                       environ_base={"REMOTE_ADDR": ip}, follow_redirects=True)


def confirmation_links() -> list[str]:
    db.session.expire_all()
    return [re.search(r"http://localhost:5000(/join/confirm/\S+)", m.text).group(1)
            for m in db.session.scalars(select(TransactionalMessage).order_by(
                TransactionalMessage.id))]


def subscription(email: str, list_id: int) -> Subscription | None:
    db.session.expire_all()
    return db.session.scalar(
        select(Subscription).join(Subscriber, Subscriber.id == Subscription.subscriber_id)
        .where(Subscriber.email == email, Subscription.list_id == list_id))


def test_sign_up_then_confirm_by_the_emailed_link(client, weekly):
    form = client.get(f"/join/{weekly}")
    assert form.status_code == 200 and 'name="website"' in form.text
    response = join(client, weekly, "New.Reader@Example.com", "New Reader")
    assert response.status_code == 200 and "Check your inbox" in response.text
    assert subscription("new.reader@example.com", weekly).status == "unconfirmed"
    message = db.session.scalar(select(TransactionalMessage))
    assert (message.kind, message.to_email, message.status) == (
        "confirmation", "new.reader@example.com", "pending")
    assert message.subscriber_id == subscription("new.reader@example.com", weekly).subscriber_id
    assert "Weekly" in message.subject and "/join/confirm/" in message.html
    [link] = confirmation_links()

    page = client.get(link)  # mail scanners follow links: a GET changes nothing
    assert "Confirm my subscription" in page.text
    assert subscription("new.reader@example.com", weekly).status == "unconfirmed"
    done = client.post(link)
    assert done.status_code == 200 and "You are subscribed" in done.text
    confirmed = subscription("new.reader@example.com", weekly)
    assert confirmed.status == "active" and confirmed.confirmed_at is not None
    assert client.post(link).status_code == 200  # idempotent
    assert [e.kind for e in db.session.scalars(select(Event).order_by(Event.id))] == [
        "subscribed", "confirmed"]
    assert "already on" in client.get(link).text


def test_the_public_page_exists_only_while_sign_up_is_enabled(client, app):
    closed = lists.create_list(db.session, "Closed").id
    assert client.get(f"/join/{closed}").status_code == 404
    assert join(client, closed, "a@example.com").status_code == 404
    assert client.get("/join/999").status_code == 404
    assert count(Subscriber) == 0


def test_repeated_sign_ups_send_one_confirmation_per_ten_minutes(client, weekly):
    for _ in range(3):
        assert join(client, weekly, "reader@example.com").status_code == 200
    assert count(TransactionalMessage) == 1
    sent = subscription("reader@example.com", weekly)
    sent.confirmation_sent_at -= timedelta(minutes=11)
    db.session.commit()
    join(client, weekly, "reader@example.com")
    assert count(TransactionalMessage) == 2
    old, new = confirmation_links()
    # Only the newest link works: each email's link names the moment it was sent.
    assert client.post(old).status_code == 404
    assert client.post(new).status_code == 200
    assert subscription("reader@example.com", weekly).status == "active"


def normalised(html: str) -> str:
    return re.sub(r"hx-headers='[^']*'", "", html)


def test_the_answer_is_the_same_whoever_signs_up(client, weekly):
    for email, status in [("active@example.com", "active"), ("left@example.com", "unsubscribed")]:
        subscriber, _ = subscribers.save_subscriber(db.session, email=email)
        db.session.add(Subscription(subscriber_id=subscriber.id, list_id=weekly, status=status,
                                    unsubscribe_source="one-click" if status != "active" else None))
    blocked, _ = subscribers.save_subscriber(db.session, email="blocked@example.com")
    suppression.suppress(db.session, blocked.id, "blocked")
    db.session.commit()

    answers = {normalised(join(client, weekly, email).text) for email in [
        "fresh@example.com", "active@example.com", "left@example.com", "blocked@example.com"]}
    assert len(answers) == 1

    sent_to = {m.to_email for m in db.session.scalars(select(TransactionalMessage))}
    # Active people need nothing; suppressed people get nothing; the one who left decides.
    assert sent_to == {"fresh@example.com", "left@example.com"}
    assert subscription("blocked@example.com", weekly) is None
    assert subscription("left@example.com", weekly).status == "unsubscribed"
    [_, left_link] = confirmation_links()
    client.post(left_link)
    rejoined = subscription("left@example.com", weekly)
    assert rejoined.status == "active" and rejoined.unsubscribe_source is None


@pytest.fixture
def slow_answer(app_config):
    app_config["SIGNUP_ANSWER_SECONDS"] = 0.5


def test_every_answer_takes_the_same_least_time_whoever_signs_up(slow_answer, client, weekly):
    """A newcomer costs a subscriber, a subscription and a queued email, somebody on the list
    a few reads: each answer leaves no sooner than the configured floor after the request
    began, so its time does not tell which (a lower bound only: speed is for bench/)."""
    on_list, _ = subscribers.save_subscriber(db.session, email="active@example.com")
    db.session.add(Subscription(subscriber_id=on_list.id, list_id=weekly, status="active"))
    blocked, _ = subscribers.save_subscriber(db.session, email="blocked@example.com")
    suppression.suppress(db.session, blocked.id, "blocked")
    db.session.commit()
    for email, extra in (("fresh@example.com", {}), ("active@example.com", {}),
                         ("blocked@example.com", {}), ("bot@example.com", {"website": "x"})):
        began = time.monotonic()
        response = client.post(f"/join/{weekly}", data={"email": email, **extra},
                               environ_base={"REMOTE_ADDR": "198.51.100.8"})
        took = time.monotonic() - began
        assert (response.status_code, response.location) == (303, f"/join/{weekly}/check-inbox")
        assert took >= 0.5, (email, took)
    assert {m.to_email for m in db.session.scalars(select(TransactionalMessage))} == {
        "fresh@example.com"}


def test_a_filled_honeypot_gets_the_usual_answer_and_nothing_happens(client, weekly):
    response = join(client, weekly, "bot@example.com", website="http://spam.example")
    assert response.status_code == 200 and "Check your inbox" in response.text
    assert count(Subscriber) == count(TransactionalMessage) == 0


@pytest.fixture
def low_ip_limit(app_config):
    app_config["SIGNUP_IP_LIMIT"] = 3


def test_too_many_sign_ups_from_one_ip_are_turned_away(low_ip_limit, client, weekly):
    for i in range(3):
        assert join(client, weekly, f"r{i}@example.com").status_code == 200
    refused = join(client, weekly, "r3@example.com")
    assert refused.status_code == 429 and "Too many sign-ups" in refused.text
    assert subscription("r3@example.com", weekly) is None
    assert join(client, weekly, "r3@example.com", ip="203.0.113.9").status_code == 200


def test_ipv6_sign_ups_are_counted_per_64(low_ip_limit, client, weekly):
    # One household or one VPS gets a whole /64: rotating through it gains nothing.
    for i in range(3):
        assert join(client, weekly, f"v{i}@example.com", ip=f"2001:db8:5:6::{i + 1}").status_code == 200
    refused = join(client, weekly, "v3@example.com", ip="2001:db8:5:6:aaaa:bbbb:cccc:dddd")
    assert refused.status_code == 429 and "Too many sign-ups" in refused.text
    assert subscription("v3@example.com", weekly) is None
    # The next /64 over is somebody else.
    assert join(client, weekly, "v3@example.com", ip="2001:db8:5:7::1").status_code == 200
    # An IPv4 client is still counted per address.
    assert join(client, weekly, "v4@example.com", ip="203.0.113.10").status_code == 200


def test_a_bad_address_is_shown_again_with_the_reason_and_nothing_is_written(client, weekly):
    response = join(client, weekly, "not an address", "Name")
    assert response.status_code == 422
    assert "not a valid email address" in response.text and 'value="Name"' in response.text
    assert count(Subscriber) == 0


def test_tampered_expired_and_foreign_links_are_refused(client, weekly):
    join(client, weekly, "reader@example.com")
    [link] = confirmation_links()
    token = link.rsplit("/", 1)[1]
    for bad in (token[:-2] + ("AA" if not token.endswith("AA") else "BB"), "garbage", "x" * 600):
        assert client.post(f"/join/confirm/{bad}").status_code == 404
        assert client.get(f"/join/confirm/{bad}").status_code == 404

    class EightDaysAgo(TimestampSigner):
        def get_timestamp(self):
            return int(time.time()) - 8 * 24 * 3600

    sub = subscription("reader@example.com", weekly)
    stale = URLSafeTimedSerializer(SECRET_KEY, salt=signup.SALT, signer=EightDaysAgo).dumps(
        [sub.subscriber_id, weekly, signup._stamp(sub.confirmation_sent_at)])
    assert client.post(f"/join/confirm/{stale}").status_code == 404
    # The unsubscribe link's signature is not a confirmation.
    from tests.helpers import make_token
    foreign = make_token(sub.subscriber_id, weekly)
    assert client.post(f"/join/confirm/{foreign}").status_code == 404
    assert subscription("reader@example.com", weekly).status == "unconfirmed"


def test_the_list_page_offers_an_embeddable_form(logged_in_client, weekly):
    page = logged_in_client.get(f"/lists/{weekly}")
    snippet = re.search(r'<code id="signup-snippet">(.*?)</code>', page.text, re.S).group(1)
    assert "&lt;form method=&#34;post&#34; action=&#34;http://localhost:5000/join/" in snippet \
        or '&lt;form method="post" action="http://localhost:5000/join/' in snippet
    assert "website" in snippet and "<form" not in snippet
    # The reader's time zone, as their browser names it (for "at 09:00 in each reader's zone").
    assert re.search(r"name=(&#34;|&quot;|\")timezone", snippet) and "resolvedOptions().timeZone" in snippet


def test_public_pages_set_no_cookie(client, weekly):
    assert "Set-Cookie" not in client.get(f"/join/{weekly}").headers
    response = join(client, weekly, "reader@example.com")
    assert "Set-Cookie" not in response.headers
    [link] = confirmation_links()
    assert "Set-Cookie" not in client.get(link).headers
    assert "Set-Cookie" not in client.post(link).headers


@pytest.fixture
def redis_down(app_config):
    app_config["REDIS_URL"] = "redis://127.0.0.1:1/0"  # nothing listens there


def test_sign_up_still_works_while_redis_is_down(redis_down, client, weekly):
    response = join(client, weekly, "reader@example.com")
    assert response.status_code == 200 and "Check your inbox" in response.text
    # The confirmation waits as a pending row; the worker sends pending rows when it starts.
    assert db.session.scalar(select(TransactionalMessage.status)) == "pending"
