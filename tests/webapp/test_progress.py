"""The live progress bar: a cheap fragment polled by htmx, and the buttons that steer a send."""

from __future__ import annotations

import re
from contextlib import contextmanager
from datetime import datetime

import pytest
from sqlalchemy import event, update

from broadside.campaigns.broadcasts.progress import Progress, duration_words
from broadside.core.models import Broadcast, Delivery
from tests.helpers import csrf_token_from, make_list, start_broadcast
from webapp.extensions import db

HTMX = {"HX-Request": "true"}


@contextmanager
def statements():
    """Every SQL statement the app sends while the block runs."""
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def set_counters(broadcast_id: int, **values) -> None:
    db.session.execute(update(Broadcast).where(Broadcast.id == broadcast_id).values(**values))
    db.session.commit()


@pytest.fixture
def sending(app) -> Broadcast:
    """A broadcast to 40 people, queued (no worker in these tests), then shown as mid-send."""
    broadcast = start_broadcast(app, make_list(db.session, 40), subject="Autumn news", enqueue=False)
    set_counters(broadcast.id, status="sending", pending_count=22, sending_count=2, sent_count=12,
                 skipped_count=2, failed_count=1, unknown_count=1, send_rate=4.0)
    return broadcast


def page_csrf(client, broadcast_id: int) -> str:
    return csrf_token_from(client.get(f"/broadcasts/{broadcast_id}").text)


def test_fragment_reads_one_row_and_never_counts_deliveries(logged_in_client, sending):
    path = f"/broadcasts/{sending.id}/progress"
    with statements() as seen:
        response = logged_in_client.get(path, headers=HTMX)
    assert response.status_code == 200
    assert not [s for s in seen if "deliveries" in s.lower()], seen
    assert len([s for s in seen if re.search(r"\bfrom broadcasts\b", s.lower())]) == 1, seen
    assert not [s for s in seen if "count(" in s.lower()], seen



def test_the_read_gives_each_column_of_the_row_to_its_field(app, sending):
    """read_progress reads the row's columns by a statement built once: each field is its own
    column (every one set to a value of its own here), the pace the identity's when it has
    one, else the default given."""
    from dataclasses import fields

    from broadside.campaigns.broadcasts.progress import _COLUMNS, read_progress
    from broadside.core.models import Identity

    moments = {name: datetime(2026, 5, day, 8, day) for day, name in
               enumerate(("scheduled_at", "started_at", "finished_at"), start=3)}
    set_counters(sending.id, total=1000, pending_count=101, sending_count=7, sent_count=803,
                 skipped_count=41, failed_count=29, unknown_count=19, send_rate=12.5,
                 pause_reason="a reason", notice="a notice", snapshot_cursor=444,
                 snapshot_until=555, audience_estimate=999, **moments)
    read = read_progress(db.session, sending.id, send_delay_ms=250)
    row = db.session.get(Broadcast, sending.id)
    db.session.refresh(row)
    names = [f.name for f in fields(Progress)][:len(_COLUMNS)]
    assert [getattr(read, n) for n in names] == [getattr(row, c.key) for c in _COLUMNS]
    assert (read.pending, read.sent, read.scheduled_at, read.audience_estimate) == (
        101, 803, moments["scheduled_at"], 999)
    assert read.send_delay_ms == 250  # no identity: the default pace
    identity = Identity(name="Slow", from_email="slow@example.com", delay_ms=1500)
    db.session.add(identity)
    db.session.flush()
    set_counters(sending.id, identity_id=identity.id)
    assert read_progress(db.session, sending.id, send_delay_ms=250).send_delay_ms == 1500

def test_fragment_shows_bar_counts_rate_and_time_left_and_keeps_polling(logged_in_client, sending):
    response = logged_in_client.get(f"/broadcasts/{sending.id}/progress", headers=HTMX)
    text = response.text
    assert (f'hx-get="/broadcasts/{sending.id}/progress?seen=sending.22.2.12.2.1.1" '
            'hx-trigger="every 1500ms" hx-swap="outerHTML"') in text
    bar = re.search(r"<progress[^>]*>", text).group(0)
    assert 'id="progress-bar"' in bar and 'max="40"' in bar and 'value="16"' in bar
    assert '<span class="bar-percent" id="progress-label">40%</span>' in text
    for figure, label in (("12", "sent"), ("24", "waiting"), ("2", "skipped"), ("1", "failed"),
                          ("1", "unknown")):
        assert f"<strong>{figure}</strong> {label}" in text
    assert "4.0 emails a second" in text
    assert '<dd id="eta">less than a minute</dd>' in text  # 24 waiting at 4 a second
    assert 'id="pause-button"' in text and 'id="cancel-button"' in text
    assert 'style=' not in text and "<script" not in text  # strict CSP: no inline anything
    assert response.headers["Cache-Control"] == "no-store"


def test_time_left_falls_back_to_the_pace_when_no_rate_was_measured(app, logged_in_client, sending):
    app.config["SEND_DELAY_MS"] = 500
    set_counters(sending.id, send_rate=0.0, pending_count=600, sending_count=0)
    text = logged_in_client.get(f"/broadcasts/{sending.id}/progress", headers=HTMX).text
    assert "2.0 emails a second" in text and "(expected from the pace)" in text
    assert '<dd id="eta">about 5 minutes</dd>' in text  # 600 x 0.5 s


def test_polling_stops_by_itself_when_the_broadcast_is_over(logged_in_client, sending):
    set_counters(sending.id, status="sent", pending_count=0, sending_count=0, sent_count=36,
                 finished_at=datetime(2030, 1, 1, 12, 0))
    response = logged_in_client.get(f"/broadcasts/{sending.id}/progress", headers=HTMX)
    assert response.status_code == 286  # htmx stops polling on 286...
    assert "hx-trigger" not in response.text  # ...and the new fragment has no trigger either
    assert "100%" in response.text and "Finished at 2030-01-01 12:00" in response.text
    assert 'id="pause-button"' not in response.text
    # A browser without htmx (or a reload) just gets the page, 200.
    assert logged_in_client.get(f"/broadcasts/{sending.id}/progress").status_code == 200


def test_pause_resume_and_cancel_through_htmx_answer_the_new_fragment(logged_in_client, sending):
    token = page_csrf(logged_in_client, sending.id)
    headers = {**HTMX, "X-CSRFToken": token}
    paused = logged_in_client.post(f"/broadcasts/{sending.id}/pause", headers=headers)
    assert paused.status_code == 200
    assert 'id="resume-button"' in paused.text and 'id="pause-button"' not in paused.text
    assert "Paused by the owner. Press Resume to continue from where it stopped." in paused.text
    assert "hx-trigger=\"every 1500ms\"" in paused.text  # still polled: it can be resumed elsewhere
    db.session.expire_all()
    assert db.session.get(Broadcast, sending.id).status == "paused"

    resumed = logged_in_client.post(f"/broadcasts/{sending.id}/resume", headers=headers)
    assert 'id="pause-button"' in resumed.text
    db.session.expire_all()
    assert db.session.get(Broadcast, sending.id).status == "queued"

    twice = logged_in_client.post(f"/broadcasts/{sending.id}/resume", headers=headers)
    assert twice.status_code == 200
    assert "Only a paused broadcast can be resumed." in twice.text

    cancelled = logged_in_client.post(f"/broadcasts/{sending.id}/cancel", headers=headers,
                                      data={"confirm": "yes"})
    assert cancelled.status_code == 200
    assert "Cancelled at" in cancelled.text and "hx-trigger" not in cancelled.text
    db.session.expire_all()
    broadcast = db.session.get(Broadcast, sending.id)
    assert broadcast.status == "cancelled"
    assert db.session.query(Delivery).filter_by(status="pending").count() == 0


def test_buttons_work_as_plain_forms_and_cancel_asks_first_without_javascript(logged_in_client, sending):
    token = page_csrf(logged_in_client, sending.id)
    page = logged_in_client.get(f"/broadcasts/{sending.id}")
    assert f'<form method="post" action="/broadcasts/{sending.id}/pause"' in page.text
    response = logged_in_client.post(f"/broadcasts/{sending.id}/pause", data={"csrf_token": token})
    assert response.status_code == 302
    shown = logged_in_client.get(response.headers["Location"])
    assert "Paused. Nothing more is sent until you press Resume." in shown.text
    assert 'id="resume-button"' in shown.text

    ask = logged_in_client.post(f"/broadcasts/{sending.id}/cancel", data={"csrf_token": token})
    assert ask.status_code == 200 and "Yes, cancel it" in ask.text
    db.session.expire_all()
    assert db.session.get(Broadcast, sending.id).status == "paused"  # nothing changed yet
    done = logged_in_client.post(f"/broadcasts/{sending.id}/cancel",
                                 data={"csrf_token": token, "confirm": "yes"})
    assert done.status_code == 302
    db.session.expire_all()
    assert db.session.get(Broadcast, sending.id).status == "cancelled"


def test_a_paused_broadcast_says_why_in_words_and_what_to_do(logged_in_client, sending):
    reason = ("The mail server refused our login (535 5.7.8 Authentication failed). Check the user "
              "name and password in SMTP_URL, restart the worker, then press Resume.")
    set_counters(sending.id, status="paused", pause_reason=reason)
    page = logged_in_client.get(f"/broadcasts/{sending.id}")
    assert reason in page.text
    assert "Resume carries on with the 24 still waiting." in page.text
    assert 'id="resume-button"' in page.text


def test_the_page_says_sending_is_stopped_when_no_worker_runs(logged_in_client, sending):
    page = logged_in_client.get(f"/broadcasts/{sending.id}")
    assert "Sending is stopped: the worker is not running." in page.text
    set_counters(sending.id, status="sent")
    assert "Sending is stopped" not in logged_in_client.get(f"/broadcasts/{sending.id}").text


def test_progress_arithmetic():
    def make(**values) -> Progress:
        base = dict(id=1, status="sending", total=3, pending=1, sending=0, sent=2, skipped=0,
                    failed=0, unknown=0, send_rate=0.0, pause_reason=None, notice=None,
                    scheduled_at=None, started_at=None, finished_at=None)
        return Progress(**{**base, **values})

    assert make().percent == 66  # floor: 100% only when every row is handled
    assert make(total=0, pending=0, sent=0, status="sent").percent == 100
    assert make(send_delay_ms=0).eta_text == "unknown"
    assert make(pending=7200, send_delay_ms=1000).eta_text == "about 2 hours"
    assert make(status="paused").eta_text == "paused"
    assert make(status="sent").poll_every is None
    assert make(status="scheduled").poll_every == "every 10s"
    assert duration_words(59) == "less than a minute"
    assert duration_words(61) == "about 1 minute"
    assert duration_words(3 * 3600 + 25 * 60) == "about 3 hours 25 min"


def test_progress_while_the_recipient_list_is_prepared():
    base = dict(id=1, status="sending", total=40_000, pending=39_990, sending=0, sent=10,
                skipped=0, failed=0, unknown=0, send_rate=0.0, pause_reason=None, notice=None,
                scheduled_at=None, started_at=None, finished_at=None,
                snapshot_cursor=50_000, snapshot_until=1_000_000, audience_estimate=900_000)
    preparing = Progress(**base)
    assert preparing.preparing and preparing.prepared_percent == 5 and preparing.about == 900_000
    assert not Progress(**{**base, "snapshot_cursor": 1_000_000}).preparing
    assert Progress(**{**base, "status": "paused"}).preparing  # Resume continues it
    assert not Progress(**{**base, "status": "cancelled"}).preparing  # never continued
    # The estimate is never shown below what is already written.
    assert Progress(**{**base, "audience_estimate": 30_000}).about == 40_000
    assert Progress(**{**base, "pending": 0, "sending": 0}).eta_text == "preparing"
