"""Lists: create, rename, describe, sign-up toggle, counts by status, guarded delete."""

import html
import re

import pytest
from sqlalchemy import func, select

from broadside.audience import lists as service
from broadside.core.models import Broadcast, MailingList, Subscriber, Subscription
from tests.helpers import csrf_token_from
from webapp.extensions import db


def make_list(name="Weekly", **kwargs) -> MailingList:
    return service.create_list(db.session, name, **kwargs)


def add_people(mailing_list: MailingList, statuses: dict[str, str]) -> None:
    for email, status in statuses.items():
        subscriber = Subscriber(email=email, name="", attributes={})
        db.session.add(subscriber)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=subscriber.id, list_id=mailing_list.id,
                                    status=status))
    db.session.commit()


def test_create_list_through_the_page(logged_in_client):
    page = logged_in_client.get("/lists/")
    assert page.status_code == 200 and "New list" in page.text
    response = logged_in_client.post("/lists/", data={
        "name": "  The   Weekly ", "description": "Every Friday", "signup_enabled": "y",
        "csrf_token": csrf_token_from(page.text),
    })
    assert response.status_code == 303
    created = db.session.scalar(select(MailingList))
    assert (created.name, created.description, created.signup_enabled) == (
        "The Weekly", "Every Friday", True)
    shown = logged_in_client.get(response.headers["Location"])
    assert "The Weekly" in shown.text and 'id="signup-snippet"' in shown.text


def test_duplicate_or_empty_name_is_refused_and_writes_nothing(logged_in_client):
    make_list("Weekly")
    token = csrf_token_from(logged_in_client.get("/lists/").text)
    duplicate = logged_in_client.post("/lists/", data={"name": "weekly", "csrf_token": token})
    assert duplicate.status_code == 422 and "already a list called" in duplicate.text
    empty = logged_in_client.post("/lists/", data={"name": "   ", "csrf_token": token})
    assert empty.status_code == 422
    assert db.session.scalar(select(func.count()).select_from(MailingList)) == 1


def test_rename_describe_and_toggle_signup(logged_in_client):
    weekly = make_list("Weekly", signup_enabled=True)
    page = logged_in_client.get(f"/lists/{weekly.id}")
    response = logged_in_client.post(f"/lists/{weekly.id}", data={
        "name": "Monthly", "description": "Once a month", "csrf_token": csrf_token_from(page.text),
    })
    assert response.status_code == 303
    db.session.expire_all()
    renamed = db.session.get(MailingList, weekly.id)
    assert (renamed.name, renamed.description, renamed.signup_enabled) == (
        "Monthly", "Once a month", False)
    assert "signup-snippet" not in logged_in_client.get(f"/lists/{weekly.id}").text


def test_counts_by_status_on_the_index_and_the_list_page(logged_in_client):
    weekly = make_list("Weekly")
    add_people(weekly, {"a@example.com": "active", "b@example.com": "active",
                        "c@example.com": "unconfirmed", "d@example.com": "unsubscribed"})
    assert service.list_summary(db.session, weekly.id).counts == {
        "active": 2, "unconfirmed": 1, "unsubscribed": 1}
    page = logged_in_client.get(f"/lists/{weekly.id}")
    assert "<strong>2</strong> active" in page.text
    assert "<strong>1</strong> unsubscribed" in page.text


def test_delete_asks_first_then_removes_subscriptions_but_keeps_people(logged_in_client):
    weekly = make_list("Weekly")
    add_people(weekly, {"a@example.com": "active"})
    list_id = weekly.id
    db.session.add(Broadcast(list_id=list_id, status="sent", subject="old"))
    db.session.commit()
    confirm = logged_in_client.get(f"/lists/{list_id}/delete")
    assert confirm.status_code == 200 and "Delete the list" in confirm.text
    response = logged_in_client.post(f"/lists/{list_id}/delete",
                                     data={"csrf_token": csrf_token_from(confirm.text)})
    assert response.status_code == 302
    assert db.session.get(MailingList, list_id) is None
    assert db.session.scalar(select(func.count()).select_from(Subscription)) == 0
    assert db.session.scalar(select(func.count()).select_from(Subscriber)) == 1
    assert db.session.scalar(select(Broadcast.list_id)) is None


def test_delete_is_refused_while_a_broadcast_may_still_send(logged_in_client):
    weekly = make_list("Weekly")
    broadcast = Broadcast(list_id=weekly.id, status="draft", subject="live")
    db.session.add(broadcast)
    db.session.commit()
    for status in service.BUSY_BROADCAST_STATUSES:
        broadcast.status = status
        db.session.commit()
        confirm = logged_in_client.get(f"/lists/{weekly.id}/delete")
        assert "Cancel or finish" in confirm.text and "Delete the list" not in confirm.text
        # Even a POST straight away (a broadcast queued after the page was shown) is refused.
        response = logged_in_client.post(f"/lists/{weekly.id}/delete",
                                         data={"csrf_token": csrf_token_from(confirm.text)},
                                         follow_redirects=True)
        assert "Cancel or finish it before deleting" in response.text, status
        assert db.session.get(MailingList, weekly.id) is not None


def test_unknown_list_is_404(logged_in_client):
    assert logged_in_client.get("/lists/999").status_code == 404
    assert logged_in_client.get("/lists/999/delete").status_code == 404


@pytest.mark.parametrize("backend", ["sqlite"])
def test_created_and_deleted_say_so_in_words_not_in_programmer_quotes(logged_in_client):
    token = csrf_token_from(logged_in_client.get("/lists/").text)
    created = logged_in_client.post("/lists/", data={"name": "Ann's News", "csrf_token": token},
                                    follow_redirects=True)
    flash = re.search(r'<div class="flash flash-success" role="status">([^<]*)</div>', created.text)
    assert flash, created.text
    assert html.unescape(flash.group(1)) == (
        "“Ann's News” is ready. Add people by importing a CSV, or open a sign-up form under Settings.")
    with_form = logged_in_client.post("/lists/", data={"name": "Open", "signup_enabled": "y",
                                                       "csrf_token": token}, follow_redirects=True)
    assert "“Open” is ready. Its sign-up form is open; add the people you already have by " \
           "importing a CSV." in html.unescape(with_form.text)
    list_id = db.session.scalar(select(MailingList.id).where(MailingList.name == "Ann's News"))
    gone = logged_in_client.post(f"/lists/{list_id}/delete", data={"csrf_token": token},
                                 follow_redirects=True)
    assert "“Ann's News” is deleted. The people on it are still in Subscribers." in html.unescape(gone.text)
