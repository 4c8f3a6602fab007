"""The System page (owner only), its SMTP check and hourly reset, the outbox viewer, and
`sending_readiness` for the send confirmation."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from sqlalchemy import select

from broadside.core.models import Event, SiteSettings
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.lease import Lease
from tests.helpers import csrf_token_from, make_list, start_broadcast
from tests.own_apps import own_app
from tests.smtp_server import SmtpServer, free_port
from webapp.broadcasts.views import PREVIEW_CSP
from webapp.doctor.smtp import check_smtp
from webapp.extensions import db, get_jobs
from webapp.readiness import sending_readiness

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")


def page_text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_system_page_is_for_the_owner_only(client, owner):
    response = client.get("/system/")
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    assert client.get("/system/live").status_code == 302
    assert client.post("/system/hourly-reset").status_code in (302, 400)


def test_page_says_no_worker_then_names_the_lease_holder(logged_in_client, redis_client, namespace):
    response = logged_in_client.get("/system/")
    assert response.status_code == 200
    text = page_text(response.text)
    assert "No worker is running" in text
    assert "System" in response.text and 'href="/system/"' in response.text  # in the navigation
    assert "✗ failed: worker: no worker holds the sending lease" in text
    assert "? not checked: SMTP" in text or "? not checked: outbox" in text
    assert "✓ passed: database" in text and "✓ passed: Redis" in text

    Lease(redis_client, namespace, identity="box:123:abcdef").try_acquire()
    live = page_text(logged_in_client.get("/system/live").text)
    assert "Worker running. box:123:abcdef holds the sending lease since" in live
    assert "last heartbeat 0." in live
    checks = logged_in_client.get("/system/checks").text
    assert checks.lstrip().startswith('<div id="checks"')
    assert "✓ passed: worker: box:123:abcdef holds the lease" in page_text(checks)


def test_queues_pace_and_achieved_rate(app, logged_in_client):
    app.config["SEND_DELAY_MS"] = 250
    weekly = make_list(db.session, 3)
    broadcast = start_broadcast(app, weekly, subject="Spring news")
    broadcast.send_rate = 3.9
    db.session.commit()
    text = page_text(logged_in_client.get("/system/live").text)
    assert "broadcasts 1" in text  # one slice waiting in the broadcasts queue
    assert "250 ms after each send (at most 4 a second)" in text
    assert "Achieved 3.9 a second" in text
    assert "Spring news : 0 of 3 sent" in text


def htmx_headers(client) -> dict[str, str]:
    token = csrf_token_from(client.get("/system/").text)
    return {"HX-Request": "true", "X-CSRFToken": token}


def test_check_smtp_now_swaps_in_the_result_and_feeds_the_send_page(app, logged_in_client, redis_client,
                                                                    namespace):
    server = SmtpServer(auth=("mailer", "right-password-42")).start()
    try:
        app.config["SMTP_URL"] = f"smtp://mailer:wrong-password@127.0.0.1:{server.port}"
        response = logged_in_client.post("/system/smtp-check", headers=htmx_headers(logged_in_client))
        assert response.status_code == 200
        assert response.text.lstrip().startswith('<div id="checks"')
        text = page_text(response.text)
        assert "✗ failed: SMTP: auth: 535" in text
        assert "password in SMTP_URL" in text
        assert "wrong-password" not in response.text
        assert server.messages == []
    finally:
        server.stop()

    Lease(redis_client, namespace).try_acquire()
    reasons = sending_readiness(app).reasons
    assert len(reasons) == 1
    assert re.match(r"The last SMTP check failed at \d\d:\d\d UTC: the mail server refused the login "
                    r"\(535 .*\)\. Fix SMTP_URL, then check again on the System page\.", reasons[0])


def test_check_smtp_now_without_javascript_redirects_with_the_result(app, logged_in_client, smtp_server):
    app.config["SMTP_URL"] = smtp_server.url
    token = csrf_token_from(logged_in_client.get("/system/").text)
    response = logged_in_client.post("/system/smtp-check", data={"csrf_token": token})
    assert response.status_code == 302
    page = page_text(logged_in_client.get("/system/").text)
    assert "SMTP check: smtp://127.0.0.1:" in page and "nothing sent" in page
    assert "✓ passed: SMTP" in page
    # Without the CSRF token nothing runs.
    assert logged_in_client.post("/system/smtp-check").status_code == 400


def test_readiness_names_each_reason_and_is_empty_when_ready(app, redis_client, namespace, smtp_server):
    assert sending_readiness(app).reasons == ["No worker is running: sending would wait until one starts."]
    Lease(redis_client, namespace).try_acquire()
    assert sending_readiness(app).reasons == []  # never checked: no reason to refuse
    app.config["SMTP_URL"] = smtp_server.url
    assert check_smtp(app).ok
    assert sending_readiness(app).reasons == []
    app.config["SMTP_URL"] = f"smtp://127.0.0.1:{free_port()}"
    assert not check_smtp(app).ok
    [reason] = sending_readiness(app).reasons
    assert reason.startswith("The last SMTP check failed at ")
    assert "could not reach the mail server" in reason


def test_readiness_when_redis_is_down(app_config):
    port = free_port()
    with own_app({**app_config, "REDIS_URL": f"redis://127.0.0.1:{port}/0"}) as app:
        reasons = sending_readiness(app).reasons
    assert reasons == [f"Redis is not answering at redis://127.0.0.1:{port}/0: start it, e.g. "
                       "`sudo apt-get install redis-server` (Debian/Ubuntu) or `brew install redis "
                       "&& brew services start redis` (macOS). The send queue lives there, so "
                       "nothing would be sent until it answers."]


def test_hourly_reset_forgets_the_window_and_leaves_evidence(app, app_config, logged_in_client,
                                                             redis_client, namespace):
    app.config["SEND_HOURLY_LIMIT"] = 5
    cap = HourlyCap(redis_client, namespace, 5)
    for _ in range(3):
        cap.record()
    page = logged_in_client.get("/system/")
    assert "3 of 5 in the last hour" in page_text(page.text)
    response = logged_in_client.post("/system/hourly-reset", data={"csrf_token": csrf_token_from(page.text)})
    assert response.status_code == 302
    assert cap.used() == 0
    db.session.expire_all()
    assert db.session.get(SiteSettings, 1).hourly_window_reset_at is not None
    event = db.session.scalars(select(Event).where(Event.kind == "hourly_reset")).one()
    assert "3 of 5 sends forgotten" in event.detail
    text = page_text(logged_in_client.get("/system/").text)
    assert "The hourly count was reset (3 sends forgotten)" in text
    assert "0 of 5 in the last hour" in text and "Last reset" in text


def test_hourly_reset_without_a_limit_changes_nothing(app, logged_in_client):
    page = logged_in_client.get("/system/")
    assert "Reset the hourly count" not in page.text
    response = logged_in_client.post("/system/hourly-reset", data={"csrf_token": csrf_token_from(page.text)})
    assert response.status_code == 302
    assert "There is no hourly limit to reset" in logged_in_client.get("/system/").text
    assert db.session.scalars(select(Event).where(Event.kind == "hourly_reset")).all() == []


def test_last_errors_show_broadcast_and_recipient_newest_first(app, logged_in_client, smtp_server,
                                                               run_worker_burst):
    weekly = make_list(db.session, 4)
    start_broadcast(app, weekly, subject="October letter")
    smtp_server.script.rcpt_replies = {"reader00001@example.com": ["550 5.1.1 No such user"]}
    smtp_server.script.drop_after_data = {"reader00002@example.com"}
    run_worker_burst()
    html = logged_in_client.get("/system/").text
    table = page_text(html.split('id="error-table"')[1].split("</table>")[0])
    assert "reader00001@example.com" in table and "550 5.1.1 No such user" in table
    assert "reader00002@example.com" in table and "unknown" in table
    assert "October letter" in table
    assert table.index("reader00002@example.com") < table.index("reader00001@example.com")
    assert "reader00000@example.com" not in table


def test_failed_test_sends_and_confirmations_show_among_the_errors(app, logged_in_client, smtp_server,
                                                                  run_worker_burst):
    """Transactional mail goes through the same server: when it fails, the owner looks here."""
    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_test
    from broadside.delivery.transactional import queue_transactional

    weekly = make_list(db.session, 0)
    draft = create_draft(db.session, list_id=weekly.id, subject="November letter", body="Body")
    send_test(db.session, draft.id, "typo@example.com", default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    queue_transactional(db.session, get_jobs(), kind="confirmation", to_email="gone@example.org",
                        subject="Please confirm", html="<p>x</p>", text="x")
    smtp_server.script.rcpt_replies = {"typo@example.com": ["550 5.1.1 No such user"],
                                       "gone@example.org": ["550 5.1.1 Mailbox unavailable"]}
    run_worker_burst()
    table = page_text(logged_in_client.get("/system/").text.split('id="error-table"')[1].split("</table>")[0])
    assert "Test send: [Test] November letter" in table and "typo@example.com" in table
    assert "Sign-up confirmation: Please confirm" in table and "gone@example.org" in table
    assert "550 5.1.1 No such user" in table and "550 5.1.1 Mailbox unavailable" in table


def run_outbox_worker(app) -> None:
    from jobs.app import from_flask
    from jobs.worker import run_worker

    app.config["SMTP_URL"] = ""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert run_worker(from_flask(app), burst=True) == 0
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        db.session.expire_all()


def test_outbox_lists_messages_and_shows_one_as_the_recipient_would(app, logged_in_client):
    weekly = make_list(db.session, 2)
    start_broadcast(app, weekly, subject="Hello {{ name }}", body="Hi **{{ name }}**, the news.")
    run_outbox_worker(app)
    page = logged_in_client.get("/system/").text
    names = re.findall(r'href="/system/outbox/([^"]+)"', page)
    assert len(names) == 2
    assert "Hello Reader 1" in page and "reader00000@example.com" in page

    message = logged_in_client.get(f"/system/outbox/{names[0]}")
    assert message.status_code == 200
    text = page_text(message.text)
    assert "Subject Hello Reader" in text and "List-Unsubscribe" in text
    assert re.search(r"Hi Reader \d, the news\.", text)  # the plain-text part
    frame_src = re.search(r'<iframe [^>]*\bsandbox\b[^>]*\ssrc="([^"]+)"', message.text).group(1)
    assert frame_src == f"/system/outbox/{names[0]}/html"

    frame = logged_in_client.get(f"/system/outbox/{names[0]}/html")
    assert frame.status_code == 200
    assert re.search(r"Hi <strong>Reader \d</strong>", frame.text)
    assert frame.headers["Content-Security-Policy"] == PREVIEW_CSP
    assert frame.headers["X-Frame-Options"] == "SAMEORIGIN"


def test_outbox_never_serves_a_file_outside_its_folder(app, logged_in_client):
    folder = Path(app.instance_path) / "outbox"
    folder.mkdir(parents=True, exist_ok=True)
    os.symlink(Path(app.instance_path) / "secret_key", folder / "evil.eml")
    (Path(app.instance_path) / "secret_key").write_text("top secret value")
    for name in ("evil.eml", "..%2Fsecret_key", "%2E%2E%2Fsecret_key.eml", "secret_key", ".eml",
                 "nothing-here.eml"):
        for suffix in ("", "/html"):
            response = logged_in_client.get(f"/system/outbox/{name}{suffix}")
            assert response.status_code == 404, (name, suffix)
            assert "top secret value" not in response.text


def test_with_smtp_configured_there_is_no_outbox(app, logged_in_client, smtp_server):
    app.config["SMTP_URL"] = smtp_server.url
    folder = Path(app.instance_path) / "outbox"
    folder.mkdir(parents=True, exist_ok=True)
    name = "20260101T000000-000000001-a@example.com.eml"
    (folder / name).write_bytes(b"Subject: old\r\n\r\nold\r\n")
    assert 'id="outbox"' not in logged_in_client.get("/system/").text
    assert logged_in_client.get(f"/system/outbox/{name}").status_code == 404


def test_dashboard_banner_warns_when_the_last_smtp_check_failed(app, logged_in_client, redis_client,
                                                                 namespace):
    Lease(redis_client, namespace).try_acquire()
    assert "Sending will fail" not in logged_in_client.get("/").text
    app.config["SMTP_URL"] = f"smtp://127.0.0.1:{free_port()}"
    assert not check_smtp(app).ok
    text = page_text(logged_in_client.get("/").text)
    assert ("Sending will fail: the last SMTP check failed (connect: could not connect to "
            "smtp://127.0.0.1:") in text


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_line_not_checked_yet_names_the_button_by_its_label(app, logged_in_client, smtp_server):
    from broadside.delivery.identities import service as identities

    def button_and_waiting_lines() -> tuple[str, list[str]]:
        html = logged_in_client.get("/system/checks").text
        button = re.search(r'<button type="submit">([^<]+)</button>', html)
        assert button, html
        return button.group(1), re.findall(r"not checked yet: press “([^”]+)”", html)

    app.config["SMTP_URL"] = ""  # the outbox
    assert button_and_waiting_lines() == ("Check the outbox now", ["Check the outbox now"])
    app.config["SMTP_URL"] = smtp_server.url
    assert button_and_waiting_lines() == ("Check SMTP now", ["Check SMTP now"])
    data = identities.parse_input({"name": "Product", "from": "Product <p@acme.example>",
                                   "transport": smtp_server.url})
    identities.create(db.session, data)
    assert button_and_waiting_lines() == ("Check connections now", ["Check connections now"] * 2)
