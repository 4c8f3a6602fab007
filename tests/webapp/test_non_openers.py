"""Engagement from real pixel hits, on both databases: a broadcast sent with per-person
tracking through the real worker to aiosmtpd; readers open it by requesting the tracking
image found in the message they received (one through Apple's proxy, taken for a machine),
one only clicks a link, one does nothing. Then:

- segments of openers, non-openers, clickers, "never opened" reach exactly them, and a
  broadcast to the non-openers' segment reaches exactly them through the worker;
- "Send again to those who did not open": offered after the wait, its confirmation page
  counts exactly the non-openers, the draft's send page counts the same, and its Send
  reaches exactly them through the worker (the snapshot applies `not_opened_clause`).
"""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from sqlalchemy import update

from broadside.campaigns.analytics import modes
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, MailingList
from broadside.core.timeutil import utcnow
from broadside.segments import service as segments
from tests.helpers import csrf_token_from, make_list
from tests.webapp.test_tracking import HREF, PIXEL, READER, html_of, later
from webapp.extensions import db, get_jobs

BODY = "Hi {{ name }}. Read [the notes](https://acme.example/notes)."
APPLE_PROXY = {"REMOTE_ADDR": "17.58.1.9"}  # Apple Mail Privacy Protection's network


def _send(app, list_id: int, subject: str, tracking: str = "per_person") -> Broadcast:
    draft = create_draft(db.session, list_id=list_id, subject=subject, body=BODY)
    modes.choose(db.session, draft.id, tracking)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())


def received_by(smtp_server) -> dict[str, object]:
    return {m.rcpt_tos[0]: m for m in smtp_server.messages}


def opened_by_some(app, client, smtp_server, run_worker_burst) -> tuple[Broadcast, list[str]]:
    """Five readers got it; 0 and 1 opened it, 2's open came through Apple's proxy (a
    machine), 3 only clicked its link, 4 did nothing. Returns the broadcast and the readers'
    addresses in order."""
    weekly = make_list(db.session, 5)
    modes.set_list_tracking(db.session, weekly.id, "people")
    broadcast = _send(app, weekly.id, "November")
    run_worker_burst()
    messages = received_by(smtp_server)
    readers = sorted(messages)
    assert len(readers) == 5
    for n, environ in ((0, {}), (1, {}), (2, APPLE_PROXY)):
        pixel = unescape(PIXEL.search(html_of(messages[readers[n]])).group(1))
        assert client.get(later(app, pixel), headers=READER, environ_base=environ).status_code == 200
    link = next(unescape(h) for h in HREF.findall(html_of(messages[readers[3]])) if "/t/c/" in h)
    assert client.get(later(app, link), headers=READER).status_code == 302
    smtp_server.reset()
    return db.session.get(Broadcast, broadcast.id), readers


def matching(rules) -> set[str]:
    group = segments.validate(db.session, rules)
    return {s.email for s in segments.sample(db.session, group, limit=50)}


def test_segments_built_from_real_pixel_hits_reach_exactly_the_people_they_name(
        app, logged_in_client, api_headers, smtp_server, run_worker_burst, postal_address):
    client = logged_in_client
    broadcast, readers = opened_by_some(app, client, smtp_server, run_worker_burst)
    b = broadcast.id
    openers, others = set(readers[:2]), set(readers[2:])
    assert matching({"all": [{"field": "opened", "op": "is", "value": b}]}) == openers
    assert matching({"all": [{"field": "opened_any", "op": "within_days", "value": 1}]}) == openers
    assert matching({"all": [{"field": "opened_any", "op": "not_within_days", "value": 1}]}) == others
    assert matching({"all": [{"field": "never_opened", "op": "is", "value": True}]}) == others
    assert matching({"all": [{"field": "clicked", "op": "is", "value": b}]}) == {readers[3]}
    assert matching({"all": [{"field": "clicked_any", "op": "within_days", "value": 7}]}) == {readers[3]}
    not_clicked = {"all": [{"field": "clicked", "op": "is_not", "value": b}]}
    assert matching(not_clicked) == set(readers) - {readers[3]}

    # Over the API, then sent through the worker: exactly the non-openers get it.
    rules = {"all": [{"field": "received", "op": "is", "value": b},
                     {"field": "opened", "op": "is_not", "value": b}]}
    created = client.post("/api/segments", headers=api_headers,
                          json={"name": "Did not open November", "rules": rules})
    assert created.status_code == 201, created.json
    assert created.json["rules"] == rules
    segment_id = created.json["id"]
    counted = client.get(f"/api/segments/{segment_id}/count", headers=api_headers)
    assert counted.json == {"count": 3}
    # The segments page's summary reads the rule in words.
    index = unescape(client.get("/segments/").text)
    assert "received “November” and did not open “November”" in index
    draft = create_draft(db.session, segment_id=segment_id, subject="For the non-openers", body=BODY)
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker_burst()
    assert sorted(received_by(smtp_server)) == sorted(others)


def test_the_resend_reaches_exactly_those_who_did_not_open(
        app, logged_in_client, smtp_server, run_worker_burst, postal_address):
    client = logged_in_client
    broadcast, readers = opened_by_some(app, client, smtp_server, run_worker_burst)
    non_openers = sorted(readers[2:])  # the machine's open and the click do not count as opens
    # Within the wait: the page says when it becomes available, and the press is refused.
    show = unescape(client.get(f"/broadcasts/{broadcast.id}").text)
    assert 'id="resend-button"' not in show
    assert "it can be sent again from" in show
    page = client.get(f"/broadcasts/{broadcast.id}/non_openers")
    assert page.status_code == 200 and 'id="resend-create"' not in page.text
    refused = client.post(f"/broadcasts/{broadcast.id}/non_openers",
                          data={"csrf_token": csrf_token_from(page.text), "subject": "Again"})
    assert refused.status_code == 409 and "it can be sent again from" in unescape(refused.text)

    # The wait over (it finished 25 hours ago): the button, then the confirmation.
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast.id)
                       .values(finished_at=utcnow() - timedelta(hours=25)))
    db.session.commit()
    assert 'id="resend-button"' in client.get(f"/broadcasts/{broadcast.id}").text
    page = client.get(f"/broadcasts/{broadcast.id}/non_openers")
    assert re.search(r'id="resend-count">3<', page.text), page.text
    assert "Apple Mail Privacy Protection" in unescape(page.text)
    token = csrf_token_from(page.text)
    # A bad subject: the form again, the message at the field, nothing written.
    for subject, message in (("", "Give it a new subject"), (" november ", "different from the first")):
        answer = client.post(f"/broadcasts/{broadcast.id}/non_openers",
                             data={"csrf_token": token, "subject": subject})
        assert answer.status_code == 422
        assert 'id="subject-error"' in answer.text and message in unescape(answer.text)
        assert db.session.query(Broadcast).filter_by(resend_of_id=broadcast.id).count() == 0
    made = client.post(f"/broadcasts/{broadcast.id}/non_openers",
                       data={"csrf_token": token, "subject": "In case you missed it"})
    assert made.status_code == 302
    resend = db.session.query(Broadcast).filter_by(resend_of_id=broadcast.id).one()
    assert made.headers["Location"].endswith(f"/broadcasts/{resend.id}/edit")
    assert (resend.subject, resend.body, resend.list_id, resend.tracking) == (
        "In case you missed it", broadcast.body, broadcast.list_id, "per_person")
    # The original now links to it instead of offering it again.
    show = client.get(f"/broadcasts/{broadcast.id}").text
    assert 'id="resend-button"' not in show and f'/broadcasts/{resend.id}"' in show

    # The draft's send page counts the same people; Send reaches exactly them.
    send_page = unescape(client.get(f"/broadcasts/{resend.id}/send").text)
    assert '<strong class="big-number">3</strong> active subscribers will receive it' in send_page
    send_broadcast(db.session, resend.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker_burst()
    assert sorted(received_by(smtp_server)) == non_openers


@pytest.mark.parametrize("tracking", ["aggregate", "per_person"])
def test_the_resend_is_not_offered_without_per_person_tracking_and_says_why(
        app, logged_in_client, smtp_server, run_worker_burst, postal_address, tracking):
    weekly = make_list(db.session, 2)
    if tracking == "per_person":  # the broadcast tracked per person, then the list said no
        modes.set_list_tracking(db.session, weekly.id, "people")
    broadcast = _send(app, weekly.id, "Counts only", tracking=tracking)
    run_worker_burst()
    modes.set_list_tracking(db.session, weekly.id, "counts")
    # Within the wait: the reason already (the wait's "from then" would promise too much).
    show = unescape(logged_in_client.get(f"/broadcasts/{broadcast.id}").text)
    assert 'id="resend-button"' not in show
    reason = re.search(r'id="resend-reason">([^<]*)', show).group(1)
    assert ("aggregate only for the list “Weekly”" in reason if tracking == "per_person"
            else "only per-person tracking tells who opened it" in reason), reason


def test_a_list_with_tracking_off_gets_no_pixel_and_untracked_links(
        app, logged_in_client, api_headers, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 2)
    changed = logged_in_client.patch(f"/api/lists/{weekly.id}", headers=api_headers,
                                     json={"tracking": "off"})
    assert changed.status_code == 200
    assert changed.json == {"id": weekly.id, "name": "Weekly", "tracking": "off"}
    assert db.session.get(MailingList, weekly.id).no_tracking is True
    _send(app, weekly.id, "Quiet", tracking="aggregate")
    run_worker_burst()
    assert len(smtp_server.messages) == 2
    for message in smtp_server.messages:
        html = html_of(message)
        assert not PIXEL.search(html) and "/t/c/" not in html
        assert "https://acme.example/notes" in [unescape(h) for h in HREF.findall(html)]
