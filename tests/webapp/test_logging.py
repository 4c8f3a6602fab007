"""Logs: one line per meaningful event, plain or JSON, the job and broadcast id on every worker
line, and never a password, an API token, an unsubscribe token or a message body; proved on
the real worker process, the development server and gunicorn as the Procfile runs it."""

from __future__ import annotations

import io
import json
import logging
import re
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import select

from broadside.core.logs import log_context, owner_action
from broadside.core.models import Broadcast, Delivery
from tests.helpers import make_list, make_token, start_broadcast, wait_until
from tests.own_apps import release
from tests.procfile import serving, web_env
from tests.smtp_server import SmtpServer
from webapp.extensions import db

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")

SMTP_USER, SMTP_PASSWORD = "mailer", "smtp-password-5c2e"
METRICS_TOKEN = "metrics-token-91d0a7"
WEBHOOK_SECRET = "webhook-secret-3fb8e1"
BODY_MARKER = "body-marker-e41c09"
API_TOKEN = "bs_" + "Q" * 43


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Logging is the same on both databases; the pipeline is proven on both elsewhere."""
    return request.param


@pytest.fixture
def secrets_config(app_config):
    app_config.update(METRICS_TOKEN=METRICS_TOKEN, WEBHOOK_SECRET=WEBHOOK_SECRET,
                      SMTP_URL=f"smtp://{SMTP_USER}:{SMTP_PASSWORD}@127.0.0.1:2525")
    return app_config


@contextmanager
def captured_log() -> Iterator[io.StringIO]:
    """What our one log handler writes, exactly as it would reach stderr."""
    handler = logging.getLogger("broadside")._broadside_handler
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        yield buffer
    finally:
        handler.setStream(previous)


def forbidden(app_config, extra=()) -> list[str]:
    return [SMTP_PASSWORD, METRICS_TOKEN, WEBHOOK_SECRET, app_config["SECRET_KEY"], API_TOKEN,
            BODY_MARKER, *extra]


def test_the_redaction_filter_catches_what_code_should_never_log(secrets_config, app):
    token = make_token(12, 3, 4)
    with captured_log() as out:
        log = logging.getLogger("broadside.test")
        log.warning("connecting to smtp://%s:%s@mail.example.com:587", SMTP_USER, SMTP_PASSWORD)
        log.warning("metrics %s, webhook %s, key %s", METRICS_TOKEN, WEBHOOK_SECRET,
                    secrets_config["SECRET_KEY"])
        log.warning("Authorization: Bearer %s", API_TOKEN)
        log.warning("GET /u/%s/preferences HTTP/1.1", token)
        try:
            raise RuntimeError(f"login failed with {SMTP_PASSWORD}")
        except RuntimeError:
            log.exception("unexpected")
        logging.getLogger("webapp").error("unhandled error on POST /u/%s", token)
    text = out.getvalue()
    for secret in (*forbidden(secrets_config), token):
        assert secret not in text, secret
    assert f"smtp://{SMTP_USER}:****@mail.example.com:587" in text
    assert "/u/[redacted]/preferences" in text
    assert "RuntimeError: login failed with [redacted]" in text
    assert "unhandled error on POST /u/[redacted]" in text  # the Flask app's logger too


def test_json_format_carries_job_and_broadcast_ids(app_config):
    from webapp import create_app

    app = create_app({**app_config, "LOG_FORMAT": "json"}, environ={})
    try:
        with captured_log() as out, log_context(job_id="job-1", broadcast_id=7):
            logging.getLogger("broadside.worker").info("slice done: %s", "finished")
        line = json.loads(out.getvalue())
        assert line["message"] == "slice done: finished"
        assert (line["job_id"], line["broadcast_id"], line["level"]) == ("job-1", 7, "INFO")
    finally:
        release(app)


def test_owner_actions_get_one_line_with_the_broadcast_id(app):
    with captured_log() as out:
        owner_action("broadcast sent", broadcast_id=42, recipients=120)
    assert re.search(r"INFO broadside\.web \[job=- broadcast=42\] broadcast sent \(recipients=120\)$",
                     out.getvalue().strip())


# ---------------------------------------------------------------- the real worker process


@pytest.fixture(scope="module")
def auth_smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer(auth=(SMTP_USER, SMTP_PASSWORD)).start()
    yield server
    server.stop()


def send_through_worker(app, app_config, worker_factory, auth_smtp_server, **env) -> tuple[str, Broadcast]:
    auth_smtp_server.reset()
    app_config["SMTP_URL"] = auth_smtp_server.url
    weekly = make_list(db.session, 5)
    broadcast = start_broadcast(app, weekly, subject="News", body=f"Hello {{{{ name }}}}, {BODY_MARKER}.")
    auth_smtp_server.script.rcpt_replies = {"reader00003@example.com": ["550 5.1.1 No such user"]}
    worker = worker_factory(METRICS_TOKEN=METRICS_TOKEN, WEBHOOK_SECRET=WEBHOOK_SECRET, **env)

    def finished() -> bool:
        db.session.expire_all()
        status = db.session.scalar(select(Broadcast.status).where(Broadcast.id == broadcast.id))
        db.session.commit()
        return status == "sent"

    wait_until(finished, timeout=30)
    assert worker.terminate(timeout=15) == 0
    assert len(auth_smtp_server.messages) == 4
    assert BODY_MARKER in auth_smtp_server.messages[0].data.decode()  # the marker was really sent
    return worker.output, broadcast


def tokens_of(broadcast: Broadcast, app_config) -> list[str]:
    rows = db.session.execute(select(Delivery.subscriber_id).where(Delivery.broadcast_id == broadcast.id))
    return [make_token(sid, broadcast.list_id, broadcast.id, secret_key=app_config["SECRET_KEY"])
            for (sid,) in rows]


@pytest.mark.slow
def test_worker_lines_carry_ids_and_no_secret_during_a_full_broadcast(
    app, app_config, worker_factory, auth_smtp_server
):
    output, broadcast = send_through_worker(app, app_config, worker_factory, auth_smtp_server)
    for secret in forbidden(app_config, tokens_of(broadcast, app_config)):
        assert secret not in output, secret
    lines = output.splitlines()
    for event in ("broadcast started", r"delivery \d+ failed: 550", "slice done", "broadcast finished"):
        [line] = [line for line in lines if re.search(event, line)]
        job = rf"{re.escape(app_config['BROADSIDE_NAMESPACE'])}-[0-9a-f]{{32}}"  # queues.unique_name
        assert re.search(rf"\[job={job} broadcast={broadcast.id}\] {event}", line), line
    assert any("lease taken by" in line for line in lines)
    assert any(re.search(r"lease released; the stream \S+ stopped", line) for line in lines)
    assert any(line.endswith("worker stopped") for line in lines)


@pytest.mark.slow
def test_worker_logs_json_lines_with_ids(app, app_config, worker_factory, auth_smtp_server):
    output, broadcast = send_through_worker(app, app_config, worker_factory, auth_smtp_server,
                                            LOG_FORMAT="json")
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    about_it = [r for r in records if r["broadcast_id"] == broadcast.id]
    assert {r["message"].split(":")[0] for r in about_it} >= {"broadcast started", "slice done",
                                                              "broadcast finished"}
    job_id = rf"{re.escape(app_config['BROADSIDE_NAMESPACE'])}-[0-9a-f]{{32}}"  # queues.unique_name
    assert all(re.fullmatch(job_id, r["job_id"]) for r in about_it)
    for secret in forbidden(app_config, tokens_of(broadcast, app_config)):
        assert secret not in output, secret


# ---------------------------------------------------------------- the web side


def http(url: str, data: bytes | None = None, headers: dict | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def unsubscribe_token() -> str:
    weekly = make_list(db.session, 1)
    return make_token(1, weekly.id, None)


def test_the_development_server_never_logs_an_unsubscribe_token(secrets_config, app, live_server):
    token = unsubscribe_token()
    with captured_log() as out:
        assert http(f"{live_server.url}/u/{token}") == 200
        assert http(f"{live_server.url}/u/{token}", data=b"List-Unsubscribe=One-Click") == 200
        wait_until(lambda: out.getvalue().count("/u/[redacted]") >= 2, timeout=5)
    text = out.getvalue()
    assert '"POST /u/[redacted] HTTP/1.1" 200' in text
    for secret in (*forbidden(secrets_config), token):
        assert secret not in text


@pytest.mark.slow
def test_gunicorn_as_the_procfile_runs_it_redacts_tokens_in_the_access_log(secrets_config, app, tmp_path):
    token = unsubscribe_token()
    env = web_env(secrets_config, METRICS_TOKEN=METRICS_TOKEN, SMTP_URL=secrets_config["SMTP_URL"])
    log_path = tmp_path / "gunicorn.log"
    with serving(env, log_path) as port:
        base = f"http://127.0.0.1:{port}"
        referer = {"Referer": f"{base}/u/{token}"}
        assert http(f"{base}/u/{token}") == 200
        assert http(f"{base}/u/{token}", data=b"List-Unsubscribe=One-Click", headers=referer) == 200
        assert http(f"{base}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}) == 200
        wait_until(lambda: "/metrics" in log_path.read_text(), timeout=5)
    text = log_path.read_text()
    assert '"GET /u/[redacted] HTTP/1.1" 200' in text
    assert '"POST /u/[redacted] HTTP/1.1" 200 ' in text and f'"{base}/u/[redacted]"' in text
    for secret in (*forbidden(secrets_config), token):
        assert secret not in text
