"""Bulk actions on the subscriber table: the confirmation says how many and what happens, the
real worker does it in several batches, a batch run again after a crash changes nothing, and
bad input answers a clear message without storing anything. SQLite only: the SQL that differs
between engines (search, totals) is proven on both in test_subscribers.py."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, insert, select

from broadside.audience import lists as lists
from broadside.audience.subscribers import bulk
from broadside.core.models import BulkAction, Event, MailingList, Subscriber, Subscription
from broadside.delivery.queues import IMPORTS
from tests.helpers import csrf_token_from
from webapp.extensions import db, get_jobs

SIZE = 240  # half are Hamiltons: 120 people, three batches of 40 for the whole-filter actions


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def small_batches(app_config):
    # One batch per job, so the worker queues continuations as it would for a big list.
    app_config.update(BULK_BATCH_SIZE=40, BULK_SLICE_SECONDS=0)


@pytest.fixture
def audience(small_batches, app):
    weekly = MailingList(name="Weekly")
    db.session.add(weekly)
    db.session.flush()
    db.session.execute(insert(Subscriber), [
        {"email": f"{'ahamilton' if i % 2 else 'reader'}{i:03d}@example.com",
         "name": "Alexander Hamilton" if i % 2 else f"Reader {i}", "attributes": {}}
        for i in range(SIZE)])
    ids = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
    db.session.execute(insert(Subscription), [
        {"subscriber_id": sid, "list_id": weekly.id, "status": "active"} for sid in ids])
    db.session.commit()
    monthly = lists.create_list(db.session, "Monthly")
    return {"weekly": weekly.id, "monthly": monthly.id, "ids": list(ids)}


def count(model, *where) -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def confirm(client, **params):
    return client.get("/subscribers/bulk", query_string=params)


def submit(client, page) -> object:
    """Post the confirmation form exactly as the page has it (hidden fields included)."""
    form = page.text.split('action="/subscribers/bulk"', 1)[1].split("</form>", 1)[0]
    data: dict[str, list[str]] = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form):
        data.setdefault(name, []).append(value)
    return data


def post(client, data, **extra):
    return client.post("/subscribers/bulk", data={**data, **extra})


def test_add_the_selected_people_to_a_list_through_the_worker(logged_in_client, audience,
                                                             run_worker_burst):
    chosen = audience["ids"][:30]
    page = confirm(logged_in_client, action="add", target=audience["monthly"], scope="selected",
                   ids=[str(i) for i in chosen])
    assert page.status_code == 200
    assert "Add 30 people to Monthly?" in page.text
    assert "the list&#39;s welcome series does not start" in page.text
    response = post(logged_in_client, submit(logged_in_client, page))
    assert response.status_code == 303
    record = db.session.scalar(select(BulkAction))
    assert (record.status, record.total, record.subscriber_ids) == ("queued", 30, chosen)
    status_page = logged_in_client.get(response.headers["Location"])
    assert 'hx-trigger="every 1s"' in status_page.text and "Waiting for the worker" in status_page.text
    # A duplicated job (a retried enqueue) does nothing twice.
    get_jobs().clear_marker("bulk", record.id)
    get_jobs().enqueue_bulk(record.id)

    assert run_worker_burst() == 0

    assert count(Subscription, Subscription.list_id == audience["monthly"]) == 30
    assert count(Event, Event.kind == "subscribed", Event.list_id == audience["monthly"]) == 30
    db.session.refresh(record)
    assert (record.status, record.processed, record.changed) == ("done", 30, 30)
    done = logged_in_client.get(f"/subscribers/bulk/{record.id}/progress")
    assert done.status_code == 286 and "Done: 30 people added." in done.text
    assert 'value="100"' in done.text


def test_unsubscribe_everyone_a_search_matches_in_several_batches(logged_in_client, audience,
                                                                 run_worker_burst):
    table = logged_in_client.get("/subscribers/?q=hamilton")
    assert "everyone matching this search" in table.text
    # The total is its own request, so the table answers first.
    total = logged_in_client.get("/subscribers/total?q=hamilton", headers={"HX-Request": "true"})
    assert "<strong>120</strong> subscribers match" in total.text
    page = confirm(logged_in_client, action="unsubscribe", target=audience["weekly"], scope="all",
                   q="hamilton")
    assert "Unsubscribe 120 people from Weekly?" in page.text
    assert "email or name containing “hamilton”" in page.text
    # Someone who joins between the confirmation and the worker is not included.
    data = submit(logged_in_client, page)
    assert post(logged_in_client, data).status_code == 303
    late = Subscriber(email="late.hamilton@example.com", name="Late Hamilton", attributes={})
    db.session.add(late)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=late.id, list_id=audience["weekly"], status="active"))
    db.session.commit()
    # One slice, one batch: the progress page says how far it got and keeps polling.
    record = db.session.scalar(select(BulkAction))
    assert bulk.run_slice(db.session, record.id, batch_size=40, seconds=0) == "continue"
    halfway = logged_in_client.get(f"/subscribers/bulk/{record.id}/progress")
    assert halfway.status_code == 200 and "Working… 40 of 120 people so far." in halfway.text
    assert 'id="bulk-bar" max="100" value="33"' in halfway.text

    assert run_worker_burst() == 0  # the job queued at submit goes on from the cursor

    db.session.refresh(record)
    assert (record.status, record.processed, record.changed) == ("done", 120, 120)
    statuses = dict(db.session.execute(
        select(Subscriber.email, Subscription.status)
        .join(Subscription, Subscription.subscriber_id == Subscriber.id)).all())
    assert {s for e, s in statuses.items() if e.startswith("ahamilton")} == {"unsubscribed"}
    assert {s for e, s in statuses.items() if e.startswith("reader")} == {"active"}
    assert statuses["late.hamilton@example.com"] == "active"
    events = db.session.scalars(select(Event).where(Event.kind == "unsubscribed")).all()
    assert len(events) == 120 and {e.detail for e in events} == {"owner"}

    # A worker killed before it could mark the action done: found "running" with no job
    # queued. The next worker queues it again; its set's rows went with each batch (in the
    # batch's transaction), so nothing is done twice.
    db.session.execute(BulkAction.__table__.update().values(status="running", finished_at=None))
    db.session.commit()
    get_jobs().queue(IMPORTS).empty()
    assert run_worker_burst() == 0
    db.session.refresh(record)
    assert (record.status, record.processed, record.changed) == ("done", 120, 120)
    assert count(Event, Event.kind == "unsubscribed") == 120


def test_block_remove_and_erase_do_what_the_confirmation_said(logged_in_client, audience,
                                                             run_worker_burst):
    ids = audience["ids"]
    # Remove from a list: the person who unsubscribed stays recorded as unsubscribed.
    db.session.execute(Subscription.__table__.update().where(Subscription.subscriber_id == ids[0])
                       .values(status="unsubscribed"))
    db.session.commit()
    page = confirm(logged_in_client, action="remove", target=audience["weekly"], scope="selected",
                   ids=[str(i) for i in ids[:3]])
    assert "Remove 3 people from Weekly?" in page.text and "stays recorded" in page.text
    assert post(logged_in_client, submit(logged_in_client, page)).status_code == 303
    # Block whoever unsubscribed from a list: a whole-filter action on a status.
    page = confirm(logged_in_client, action="block", scope="all", status="unsubscribed")
    assert "Block 1 person?" in page.text
    assert post(logged_in_client, submit(logged_in_client, page)).status_code == 303
    # Erase: irreversible, so the count must be typed.
    page = confirm(logged_in_client, action="erase", scope="selected",
                   ids=[str(i) for i in ids[-2:]])
    assert "Erase 2 people?" in page.text and "cannot be undone" in page.text
    assert "Type 2 to confirm" in page.text
    wrong = post(logged_in_client, submit(logged_in_client, page), confirm_count="3")
    assert wrong.status_code == 422 and "Type 2 to confirm the erase." in wrong.text
    assert 'value="3"' in wrong.text  # the typed value is kept
    assert count(BulkAction) == 2
    assert post(logged_in_client, submit(logged_in_client, page),
                confirm_count="2").status_code == 303

    assert run_worker_burst() == 0

    on_weekly = set(db.session.scalars(select(Subscription.subscriber_id)
                                       .where(Subscription.list_id == audience["weekly"])))
    assert ids[0] in on_weekly and ids[1] not in on_weekly and ids[2] not in on_weekly
    assert count(Event, Event.kind == "removed") == 2
    assert db.session.get(Subscriber, ids[0]).suppression == "blocked"
    assert count(Subscriber, Subscriber.suppression.is_not(None)) == 1
    assert count(Subscriber, Subscriber.id.in_(ids[-2:])) == 0
    assert count(Subscription, Subscription.subscriber_id.in_(ids[-2:])) == 0
    assert [r.status for r in db.session.scalars(select(BulkAction))] == ["done"] * 3


@pytest.mark.parametrize(("params", "message"), [
    ({"action": "add", "target": "MONTHLY", "scope": "selected"},
     "Nobody is selected: tick the people to act on"),
    ({"action": "add", "scope": "selected", "ids": ["FIRST"]}, "Choose the list to add them to."),
    ({"action": "remove", "target": "999999", "scope": "selected", "ids": ["FIRST"]},
     "That list does not exist any more."),
    ({"action": "unsubscribe", "scope": "selected", "ids": ["FIRST"]},
     "Choose the list to unsubscribe them from"),
    ({"action": "block", "scope": "selected", "ids": ["FIRST", "1 OR 1=1"]},
     "a subscriber id was not a number"),
    ({"action": "block", "scope": "selected", "ids": ["FIRST", "999999"]},
     "1 person of the selection no longer exists (id 999999)"),
    ({"action": "launch", "scope": "selected", "ids": ["FIRST"]}, "Choose what to do with them."),
    ({"action": "block", "scope": "all", "q": "nobody-has-this"},
     "Nobody matches this filter"),
    ({"action": "block", "scope": "everything"}, "Choose whether to act on the selected"),
])
def test_bad_input_answers_a_clear_message_and_stores_nothing(logged_in_client, audience,
                                                              params, message):
    def fill(value):
        if isinstance(value, list):
            return [fill(v) for v in value]
        return {"FIRST": str(audience["ids"][0]),
                "MONTHLY": str(audience["monthly"])}.get(value, value)

    params = {k: fill(v) for k, v in params.items()}
    page = confirm(logged_in_client, **params)
    assert page.status_code == 422
    assert message in page.text.replace("&#39;", "'")
    # The form to fix it keeps the selection.
    for value in params.get("ids", []):
        assert f'name="ids" value="{value}"' in page.text.replace("&#34;", '"') or "1 OR" in value
    data = {k: v for k, v in params.items()}
    data["csrf_token"] = csrf_token_from(logged_in_client.get("/subscribers/").text)
    assert logged_in_client.post("/subscribers/bulk", data=data).status_code == 422
    assert count(BulkAction) == 0


def test_a_count_that_changed_since_the_confirmation_is_confirmed_again(logged_in_client,
                                                                       audience):
    page = confirm(logged_in_client, action="block", scope="all", q="hamilton")
    data = submit(logged_in_client, page)
    db.session.execute(Subscriber.__table__.update().where(Subscriber.id == audience["ids"][1])
                       .values(name="Someone Else", email="else@example.com"))
    db.session.commit()
    again = post(logged_in_client, data)
    assert again.status_code == 422
    assert "it is now 119" in again.text and "Block 119 people?" in again.text
    assert count(BulkAction) == 0
    assert post(logged_in_client, submit(logged_in_client, again)).status_code == 303
    assert db.session.scalar(select(BulkAction.total)) == 119


def test_the_api_mirrors_the_page(client, api_headers, audience, run_worker_burst):
    def bulk_call(payload):
        return client.post("/api/subscribers/bulk", json=payload, headers=api_headers)

    both = bulk_call({"action": "block", "ids": [audience["ids"][0]], "filter": {}})
    assert both.status_code == 422 and "not both" in both.json["error"]
    unknown = bulk_call({"action": "add", "list_id": 999999, "ids": [audience["ids"][0]]})
    assert unknown.status_code == 422 and "does not exist" in unknown.json["error"]
    erase = bulk_call({"action": "erase", "filter": {"q": "hamilton"}})
    assert erase.status_code == 422 and "(120 now)" in erase.json["error"]
    stale = bulk_call({"action": "erase", "filter": {"q": "hamilton"}, "expected": 119})
    assert stale.status_code == 409
    assert count(BulkAction) == 0

    queued = bulk_call({"action": "unsubscribe_all", "filter": {"q": "hamilton"},
                        "expected": 120})
    assert queued.status_code == 202
    assert (queued.json["action"], queued.json["list_id"], queued.json["total"]) == \
        ("unsubscribe", None, 120)
    assert run_worker_burst() == 0
    done = client.get(f"/api/subscribers/bulk/{queued.json['id']}", headers=api_headers).json
    assert (done["status"], done["processed"], done["changed"]) == ("done", 120, 120)
    assert count(Subscription, Subscription.status == "unsubscribed") == 120
