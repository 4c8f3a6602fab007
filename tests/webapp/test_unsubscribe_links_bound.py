"""An old unsubscribe link never reaches a different person: ids are not reused, and a link
is bound to the person it was made for even when a restored backup hands their id to someone
new."""

from __future__ import annotations

from sqlalchemy import insert, select

from broadside.audience.subscribers import service as subscribers
from broadside.core.models import Subscriber, Subscription
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

ONE_CLICK = {"List-Unsubscribe": "One-Click"}


def sent_links(smtp_server) -> dict[str, str]:
    """Each recipient's unsubscribe path, from the List-Unsubscribe header the worker wrote."""
    return {m.rcpt_tos[0]: m.message["List-Unsubscribe"].strip("<>").split("localhost:5000", 1)[1]
            for m in smtp_server.messages}


def newest_persons_link(app, smtp_server, run_worker_burst) -> tuple[int, int, str]:
    """A broadcast to three people, sent by the real worker: (list id, the newest person's id,
    the unsubscribe path in the message they received)."""
    weekly = make_list(db.session, 3)
    list_id = weekly.id
    start_broadcast(app, weekly)
    run_worker_burst()
    newest_id, newest_email = db.session.execute(
        select(Subscriber.id, Subscriber.email).order_by(Subscriber.id.desc())).first()
    return list_id, newest_id, sent_links(smtp_server)[newest_email]


def status_of(email: str, list_id: int) -> str | None:
    db.session.expire_all()
    return db.session.scalar(select(Subscription.status).join(Subscriber)
                             .where(Subscriber.email == email, Subscription.list_id == list_id))


def test_the_erased_newest_subscribers_link_does_not_reach_the_next_one(
        client, app, smtp_server, run_worker_burst):
    list_id, newest_id, old_link = newest_persons_link(app, smtp_server, run_worker_burst)
    subscribers.erase(db.session, newest_id)
    newcomer, _ = subscribers.save_subscriber(db.session, email="newcomer@example.org",
                                              name="New Comer", list_ids=[list_id])
    assert newcomer.id > newest_id  # the erased person's id stays theirs

    page = client.get(old_link)
    assert page.status_code == 404 and "newcomer@example.org" not in page.text
    assert client.post(old_link, data=ONE_CLICK).status_code == 404
    assert status_of("newcomer@example.org", list_id) == "active"


def test_a_link_made_before_a_backup_restore_does_not_reach_whoever_gets_the_id_after(
        client, app, smtp_server, run_worker_burst):
    list_id, reused_id, old_link = newest_persons_link(app, smtp_server, run_worker_burst)
    # The database goes back to a backup taken before this person joined; someone else signs
    # up and is given the same id, as a restored sequence would.
    subscribers.erase(db.session, reused_id)
    db.session.execute(insert(Subscriber).values(id=reused_id, email="after.restore@example.org",
                                                 name="", attributes={}))
    db.session.execute(insert(Subscription).values(subscriber_id=reused_id, list_id=list_id,
                                                   status="active"))
    db.session.commit()

    page = client.get(old_link)
    assert page.status_code == 404 and "after.restore@example.org" not in page.text
    assert client.post(old_link, data=ONE_CLICK).status_code == 404
    assert client.get(old_link + "/preferences").status_code == 404
    assert status_of("after.restore@example.org", list_id) == "active"


def test_the_link_still_works_for_the_person_it_was_made_for(client, app, smtp_server,
                                                           run_worker_burst):
    weekly = make_list(db.session, 2)
    list_id = weekly.id
    start_broadcast(app, weekly)
    run_worker_burst()
    email, link = sorted(sent_links(smtp_server).items())[0]
    assert email in client.get(link).text
    assert client.post(link, data=ONE_CLICK).status_code == 200
    assert status_of(email, list_id) == "unsubscribed"
