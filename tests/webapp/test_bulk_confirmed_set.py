"""A confirmed bulk action does what was confirmed, on SQLite and PostgreSQL: the people a
filter matched when the owner pressed the button are the only ones it may touch. Someone who
comes to match afterwards (renamed, unsubscribed meanwhile) is never included; someone of the
set who no longer matches when the worker reaches them is left alone and counted as such, on
the finished page and in the API's answer. The set's rows are gone once the action is over."""

from __future__ import annotations

import pytest
from redis.exceptions import RedisError
from sqlalchemy import func, insert, select, text, update

from broadside.audience import lists as lists
from broadside.audience.subscribers import bulk, search
from broadside.audience.subscribers import service as subscribers
from broadside.core.models import BulkAction, Subscriber, Subscription
from tests.webapp.test_subscribers_bulk import confirm, post, submit
from webapp.extensions import db

NAMES = ["Ann Hamilton", "Ben Hamilton", "Cy Hamilton", "Dee Reader", "Eve Reader", "Flo Reader"]


@pytest.fixture
def people(app):
    """Six people on Weekly; the first three are Hamiltons (what the filter finds)."""
    weekly = lists.create_list(db.session, "Weekly").id
    monthly = lists.create_list(db.session, "Monthly").id
    db.session.execute(insert(Subscriber), [
        {"email": f"{name.split()[0].lower()}@example.com", "name": name, "attributes": {}}
        for name in NAMES])
    ids = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
    db.session.execute(insert(Subscription), [
        {"subscriber_id": sid, "list_id": weekly, "status": "active"} for sid in ids])
    db.session.commit()
    return {"weekly": weekly, "monthly": monthly, "ids": list(ids)}


def rename(subscriber_id: int, name: str) -> None:
    db.session.execute(update(Subscriber).where(Subscriber.id == subscriber_id)
                       .values(name=name))
    db.session.commit()


def touched(action: str, people: dict) -> list[int]:
    """Whom the action has changed, by what it does."""
    db.session.expire_all()
    weekly, monthly = people["weekly"], people["monthly"]
    on = lambda list_id, *extra: set(db.session.scalars(  # noqa: E731
        select(Subscription.subscriber_id).where(Subscription.list_id == list_id, *extra)))
    present = set(db.session.scalars(select(Subscriber.id)))
    changed = {
        "add": on(monthly),
        "remove": present - on(weekly),
        "unsubscribe": on(weekly, Subscription.status == "unsubscribed"),
        "unsubscribe_all": on(weekly, Subscription.status == "unsubscribed"),
        "block": set(db.session.scalars(select(Subscriber.id)
                                        .where(Subscriber.suppression == "blocked"))),
        "erase": set(people["ids"]) - present,
    }[action]
    return sorted(changed)


def members() -> int:
    """The rows of the fixed sets still stored (a plain count: this file also runs against
    the code before the table existed, to show the bug)."""
    return db.session.scalar(text("SELECT count(*) FROM bulk_action_members"))


ACTIONS = ["add", "remove", "unsubscribe", "unsubscribe_all", "block", "erase"]
DID = {"add": "added", "remove": "removed", "unsubscribe": "unsubscribed",
       "unsubscribe_all": "unsubscribed", "block": "blocked", "erase": "erased"}


@pytest.mark.parametrize("action", ACTIONS)
def test_people_who_match_after_the_confirmation_are_left_alone(
        logged_in_client, people, run_worker_burst, action):
    ids = people["ids"]
    target = {"add": people["monthly"], "remove": people["weekly"],
              "unsubscribe": people["weekly"]}.get(action, "")
    page = confirm(logged_in_client, action=action, target=target, scope="all", q="hamilton")
    assert page.status_code == 200
    assert ("Erase 3 people?" if action == "erase" else "3 people") in page.text
    data = submit(logged_in_client, page)
    extra = {"confirm_count": "3"} if action == "erase" else {}
    assert post(logged_in_client, data, **extra).status_code == 303
    # After the press, before the worker: two more people come to match (ids the frozen
    # highest id covers), and one of the three stops matching.
    rename(ids[3], "Dee Hamilton")
    rename(ids[4], "Eve Hamilton")
    rename(ids[2], "Cy Someone")

    assert run_worker_burst() == 0

    assert touched(action, people) == ids[:2]
    record = db.session.scalar(select(BulkAction))
    assert (record.status, record.total, record.processed, record.changed,
            record.no_longer_matched) == ("done", 3, 3, 2, 1)
    assert members() == 0
    done = logged_in_client.get(f"/subscribers/bulk/{record.id}/progress")
    assert done.status_code == 286
    assert f"Done: 2 people {DID[action]}." in done.text
    assert "1 person no longer matched the filter and was left alone." in done.text


def test_erase_one_person_erases_one_even_if_two_more_unsubscribe_meanwhile(
        client, api_headers, people, run_worker_burst):
    """The case as it was found: "Erase 1 person?" erased three. Through the API's `expected`."""
    ids = people["ids"]
    db.session.execute(update(Subscription).where(Subscription.subscriber_id == ids[5])
                       .values(status="unsubscribed"))
    db.session.commit()
    answer = client.post("/api/subscribers/bulk", headers=api_headers, json={
        "action": "erase", "filter": {"status": "unsubscribed"}, "expected": 1})
    assert answer.status_code == 202 and answer.json["total"] == 1
    db.session.execute(update(Subscription).where(Subscription.subscriber_id.in_(ids[:2]))
                       .values(status="unsubscribed"))
    db.session.commit()

    assert run_worker_burst() == 0

    assert touched("erase", people) == [ids[5]]
    assert (answer.json["acted_on"], answer.json["no_longer_matched"]) == (0, 0)
    done = client.get(f"/api/subscribers/bulk/{answer.json['id']}", headers=api_headers).json
    assert (done["status"], done["total"], done["acted_on"], done["changed"],
            done["no_longer_matched"]) == ("done", 1, 1, 1, 0)
    assert members() == 0


def test_the_api_counts_who_no_longer_matched(client, api_headers, people, run_worker_burst):
    ids = people["ids"]
    answer = client.post("/api/subscribers/bulk", headers=api_headers, json={
        "action": "block", "filter": {"q": "hamilton"}, "expected": 3})
    assert answer.status_code == 202 and answer.json["total"] == 3
    rename(ids[0], "Ann Other")  # leaves the set's filter
    rename(ids[3], "Dee Hamilton")  # comes to match: not in the set
    db.session.execute(update(Subscriber).where(Subscriber.id == ids[1])
                       .values(suppression="blocked"))  # already so
    db.session.commit()

    assert run_worker_burst() == 0

    assert touched("block", people) == [ids[1], ids[2]]
    done = client.get(f"/api/subscribers/bulk/{answer.json['id']}", headers=api_headers).json
    assert (done["total"], done["processed"], done["acted_on"], done["changed"],
            done["no_longer_matched"]) == (3, 3, 2, 1, 1)


def test_a_selection_is_the_set_and_someone_erased_meanwhile_is_counted(
        logged_in_client, people, run_worker_burst):
    ids = people["ids"]
    page = confirm(logged_in_client, action="add", target=people["monthly"], scope="selected",
                   ids=[str(i) for i in ids[:3]])
    assert post(logged_in_client, submit(logged_in_client, page)).status_code == 303
    assert members() == 3
    subscribers.erase(db.session, ids[1])  # a privacy request, meanwhile

    assert run_worker_burst() == 0

    assert touched("add", people) == [ids[0], ids[2]]
    record = db.session.scalar(select(BulkAction))
    assert (record.processed, record.changed, record.no_longer_matched) == (3, 2, 1)
    done = logged_in_client.get(f"/subscribers/bulk/{record.id}/progress")
    assert "1 person was no longer there and was left alone." in done.text


def test_a_failed_action_leaves_no_set_behind(logged_in_client, people):
    page = confirm(logged_in_client, action="add", target=people["monthly"], scope="all",
                   q="hamilton")
    assert post(logged_in_client, submit(logged_in_client, page)).status_code == 303
    bulk_id = db.session.scalar(select(BulkAction.id))
    assert members() == 3
    lists.delete_list(db.session, people["monthly"])
    assert bulk.run_slice(db.session, bulk_id, batch_size=2, seconds=0) == "stopped"
    record = bulk.get(db.session, bulk_id)
    assert record.status == "failed" and "was deleted" in record.error
    assert members() == 0


def test_a_set_that_changed_within_the_confirmation_is_not_stored(app, people):
    """Between the count the confirmation re-checks and the set it writes, someone stops
    matching: the set is not the number the owner confirmed, so nothing is stored."""
    confirmed = bulk.plan(db.session, action="block", list_id=None, scope="all", ids=[],
                          filters=search.Filters(q="hamilton"))
    assert confirmed.total == 3
    rename(people["ids"][0], "Ann Other")
    with pytest.raises(bulk.SetChanged) as raised:
        bulk.submit(db.session, confirmed, lambda _id: None, expected=confirmed.total)
    assert raised.value.total == 2 and "it is now 2, not 3" in raised.value.message
    assert db.session.scalar(select(func.count()).select_from(BulkAction)) == 0
    assert members() == 0


def test_a_redis_outage_at_the_press_leaves_no_set_behind(app, people):
    confirmed = bulk.plan(db.session, action="block", list_id=None, scope="all", ids=[],
                          filters=search.Filters(q="hamilton"))

    def refused(_bulk_id: int) -> None:
        raise RedisError("Connection refused")

    record = bulk.submit(db.session, confirmed, refused, expected=3)
    assert record.status == "failed" and "Redis is not answering" in record.error
    assert members() == 0


def test_an_action_unfinished_at_the_upgrade_is_stopped_not_run_on_todays_filter(
        tmp_path, namespace):
    """Confirmed before sets were stored (migration 0022), an unfinished action has only its
    filter, which today reaches people nobody confirmed: the upgrade stops it, saying so."""
    from flask_migrate import upgrade

    from tests.helpers import SECRET_KEY
    from webapp import create_app

    app = create_app({"INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": SECRET_KEY,
                      "DATABASE_URL": f"sqlite:///{tmp_path / 'old.db'}",
                      "BROADSIDE_NAMESPACE": namespace}, environ={})
    with app.app_context():
        upgrade(revision="0021")
        with db.engine.begin() as connection:
            for status in ("running", "done"):
                connection.execute(text(
                    "INSERT INTO bulk_actions (action, list_name, filters, max_id, last_id, "
                    "total, processed, changed, status, created_at) VALUES ('erase', '', "
                    f"'{{\"q\": \"hamilton\"}}', 9, 3, 5, 3, 3, '{status}', '2026-12-01')"))
        upgrade()
        with db.engine.connect() as connection:
            rows = connection.execute(text(
                "SELECT status, error, no_longer_matched FROM bulk_actions ORDER BY id")).all()
        db.engine.dispose()
    assert rows[0][0] == "failed" and "upgraded while this action waited" in rows[0][1]
    assert rows[1] == ("done", None, 0)
