"""`GET /metrics`: parsed with prometheus-client's own parser and checked against a real send
(the real worker in this process, a real SMTP server), and its access rules."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from broadside.audience.unsubscribe.suppression import record_bounce, record_complaint
from broadside.core.models import Subscriber, Subscription
from broadside.delivery.eml_folder import OutboxTransport
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.lease import Lease
from jobs.broadcasts import broadcast_slice
from tests.helpers import make_list, start_broadcast, worker_runtime
from tests.own_apps import own_app
from webapp.extensions import db, get_jobs


def scrape(client, **kwargs) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", **kwargs)
    assert response.status_code == 200, response.text
    assert response.content_type.startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def paced(app_config):
    app_config["SEND_DELAY_MS"] = 100
    app_config["RETRY_BASE_SECONDS"] = 0.01


def test_metrics_match_a_real_send_and_survive_a_restart(
    paced, app, app_config, client, smtp_server, run_worker_burst
):
    weekly = make_list(db.session, 6)
    start_broadcast(app, weekly)
    # reader00001 leaves after the send was pressed (skipped at send time: unsubscribed),
    # reader00002 does not exist (550: failed, recipient), reader00003 is deferred once (451).
    db.session.execute(
        update(Subscription)
        .where(Subscription.subscriber_id == Subscriber.id, Subscriber.email == "reader00001@example.com")
        .values(status="unsubscribed")
        .execution_options(synchronize_session=False)
    )
    db.session.commit()
    smtp_server.script.rcpt_replies = {
        "reader00002@example.com": ["550 5.1.1 No such user"],
        "reader00003@example.com": ["451 4.3.0 Try again later"],
    }
    assert run_worker_burst() == 0
    assert len(smtp_server.messages) == 4
    record_bounce(db.session, "reader00004@example.com", "hard", detail="mailbox gone")
    record_complaint(db.session, "reader00005@example.com")

    samples = scrape(client)
    assert value(samples, "broadside_up", component="database") == 1
    assert value(samples, "broadside_up", component="redis") == 1
    assert value(samples, "broadside_deliveries_total", outcome="sent") == 4 == len(smtp_server.messages)
    assert value(samples, "broadside_deliveries_total", outcome="skipped") == 1
    assert value(samples, "broadside_deliveries_total", outcome="failed") == 1
    assert value(samples, "broadside_deliveries_total", outcome="unknown") == 0
    assert value(samples, "broadside_deliveries_skipped_total", reason="unsubscribed") == 1
    assert value(samples, "broadside_deliveries_failed_total", error_class="recipient") == 1
    assert value(samples, "broadside_smtp_replies_total", code="250") == 4
    assert value(samples, "broadside_smtp_replies_total", code="550") == 1
    # Three accepted at the first attempt, one at the second: 5 attempts for 4 messages.
    assert value(samples, "broadside_attempts_per_sent_message_count") == 4
    assert value(samples, "broadside_attempts_per_sent_message_sum") == 5
    assert value(samples, "broadside_attempts_per_sent_message_bucket", le="1.0") == 3
    assert value(samples, "broadside_attempts_per_sent_message_bucket", le="2.0") == 4
    assert value(samples, "broadside_broadcasts", state="sent") == 1
    assert value(samples, "broadside_broadcasts", state="sending") == 0
    assert value(samples, "broadside_bounces_total", type="hard") == 1
    assert value(samples, "broadside_bounces_total", type="soft") == 0
    assert value(samples, "broadside_complaints_total") == 1
    # Bounced: the reported hard bounce, and reader00002, whose 550 5.1.1 at RCPT is one too.
    assert value(samples, "broadside_suppressed_subscribers", reason="bounced") == 2
    assert value(samples, "broadside_suppressed_subscribers", reason="complained") == 1
    # Six real attempts (four accepted, the 550, the 451) at least 100 ms apart: the pacer
    # waited at most 5 gaps' worth (less the time each SMTP conversation took, plus its 1 ms
    # margin), and the worker kept the running total in Redis.
    assert 0 < value(samples, "broadside_wait_seconds_total", cause="pace") < 5 * 0.102
    assert value(samples, "broadside_wait_seconds_total", cause="hourly_cap") == 0
    assert value(samples, "broadside_worker_lease_held") == 0  # the burst worker has stopped
    assert value(samples, "broadside_queue_length", queue="broadcasts") == 0

    # A new web process (another app) reads the same figures: nothing lived in memory.
    with own_app(app_config) as restarted:
        again = scrape(restarted.test_client())
    for key in samples:
        if key[0].startswith(("broadside_deliveries", "broadside_smtp", "broadside_attempts",
                              "broadside_wait", "broadside_bounces", "broadside_complaints")):
            assert again[key] == samples[key], key


def test_queue_length_oldest_job_and_lease_holder(app, client, redis_client, namespace):
    weekly = make_list(db.session, 2)
    start_broadcast(app, weekly)  # enqueued, and no worker running
    samples = scrape(client)
    assert value(samples, "broadside_queue_length", queue="broadcasts") == 1
    assert value(samples, "broadside_queue_length", queue="transactional") == 0
    assert 0 <= value(samples, "broadside_queue_oldest_job_age_seconds", queue="broadcasts") < 60
    assert value(samples, "broadside_queue_oldest_job_age_seconds", queue="transactional") == 0
    assert value(samples, "broadside_broadcasts", state="queued") == 1
    assert value(samples, "broadside_deliveries_in_flight", status="pending") == 2
    assert value(samples, "broadside_worker_lease_held") == 0

    assert Lease(redis_client, namespace).try_acquire()
    samples = scrape(client)
    assert value(samples, "broadside_worker_lease_held") == 1
    assert 0 <= value(samples, "broadside_worker_heartbeat_age_seconds") < 5


def test_time_waiting_for_the_hourly_cap_is_counted(app, client, redis_client, namespace):
    weekly = make_list(db.session, 1)
    broadcast = start_broadcast(app, weekly, enqueue=False)
    cap = HourlyCap(redis_client, namespace, limit=1)
    cap.record()  # the hour is full
    rt = worker_runtime(app, OutboxTransport(app.instance_path), hourly=cap)
    started = time.monotonic()
    turn = broadcast_slice(db.session, rt, broadcast.id).turn
    assert turn.hourly_room(deadline=time.monotonic() + 0.5) is False
    waited = time.monotonic() - started
    counted = value(scrape(client), "broadside_wait_seconds_total", cause="hourly_cap")
    assert 0.1 < counted <= waited  # the sleep, without the notice written before it


def test_a_token_is_required_when_metrics_token_is_set(app, client):
    app.config["METRICS_TOKEN"] = "metrics-token-abcdef"
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    # With a token, the address does not matter: a remote Prometheus can read it.
    samples = scrape(client, headers={"Authorization": "Bearer metrics-token-abcdef"},
                     environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert ("broadside_deliveries_total", (("outcome", "sent"),)) in samples


def test_without_a_token_only_this_machine_may_read(app, client):
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.9"}).status_code == 403
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "::1"}).status_code == 200
    # A reverse proxy on this machine forwards strangers from 127.0.0.1: they are not local.
    forwarded = client.get("/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
    assert forwarded.status_code == 403
    assert "METRICS_TOKEN" in forwarded.text
    # No login is needed, and none is offered (no redirect, no session cookie).
    response = client.get("/metrics")
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers


def test_metrics_still_answer_when_redis_is_down(app_config):
    with own_app({**app_config, "REDIS_URL": "redis://127.0.0.1:1/0"}) as app:
        samples = scrape(app.test_client())
    assert value(samples, "broadside_up", component="redis") == 0
    assert value(samples, "broadside_up", component="database") == 1
    assert value(samples, "broadside_deliveries_total", outcome="sent") == 0


def test_cached_figures_follow_later_changes(app, client, smtp_server, redis_client, namespace,
                                             run_worker_burst):
    from broadside.campaigns.broadcasts.service import retry_deliveries

    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly)
    smtp_server.script.drop_after_data = {"reader00001@example.com"}
    run_worker_burst()
    samples = scrape(client)
    assert value(samples, "broadside_deliveries_total", outcome="unknown") == 1
    assert value(samples, "broadside_bounces_total", type="soft") == 0
    # The settled broadcast's figures and the bounce count are now cached in Redis...
    assert redis_client.exists(f"{namespace}:metrics:deliveries:{broadcast.id}")
    assert redis_client.exists(f"{namespace}:metrics:bounces")

    # ...and still follow what happens next: the owner sends the unknown row again,
    retry_deliveries(db.session, broadcast.id, which="unknown", jobs=get_jobs())
    samples = scrape(client)
    assert value(samples, "broadside_deliveries_total", outcome="unknown") == 0
    assert value(samples, "broadside_deliveries_in_flight", status="pending") == 1
    smtp_server.script.drop_after_data = set()
    run_worker_burst()
    record_bounce(db.session, "reader00002@example.com", "soft", detail="mailbox full")
    samples = scrape(client)
    assert value(samples, "broadside_deliveries_total", outcome="sent") == 3
    assert value(samples, "broadside_deliveries_total", outcome="unknown") == 0
    assert value(samples, "broadside_deliveries_in_flight", status="pending") == 0
    assert value(samples, "broadside_bounces_total", type="soft") == 1


def test_automation_messages_by_state_and_the_backlog_due_now(app, client, postal_address):
    from broadside.campaigns.automations import entering
    from broadside.campaigns.automations import service as automations

    weekly = make_list(db.session, 3)
    data = automations.parse_input({"name": "Welcome",
                                    "trigger": {"type": "joined_list", "list_id": weekly.id},
                                    "steps": [{"delay": "PT0S", "subject": "Hi", "body": "x"},
                                              {"delay": "P2D", "subject": "Later", "body": "y"}]})
    automation = automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)
    ids = [s.subscriber_id for s in db.session.query(Subscription).filter_by(list_id=weekly.id)]
    entering.enter_joined(db.session, weekly.id, ids, source="joined")
    db.session.commit()
    samples = scrape(client)
    assert value(samples, "broadside_automation_messages", state="pending") == 6
    assert value(samples, "broadside_automation_messages_due") == 3  # the first step; the rest in 2 days
    automations.disable(db.session, automation.id)
    assert value(scrape(client), "broadside_automation_messages_due") == 0  # held, not a backlog
