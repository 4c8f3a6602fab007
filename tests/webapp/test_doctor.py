"""`flask --app webapp doctor` and the checks it shares with the System page, against a real
aiosmtpd server (with and without AUTH), a real Redis and both databases."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broadside.core.redis_health import not_answering
from broadside.delivery.lease import Lease, LeaseKeeper
from tests.smtp_server import SmtpServer, free_port
from webapp import REPO_ROOT
from webapp.doctor.configuration import check_base_url, check_configuration, mask_url
from webapp.doctor.services import check_database
from webapp.doctor.smtp import check_smtp, last_smtp_check
from webapp.doctor.worker import check_worker

AUTH = ("mailer", "right-password-42")

# aiosmtpd warns that AUTH without TLS is unsafe: true, and fine on loopback in a test.
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")


@pytest.fixture(scope="module")
def auth_smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer(auth=AUTH).start()
    yield server
    server.stop()


def stored(app):
    return last_smtp_check(app.extensions["broadside_redis"], app.config["BROADSIDE_NAMESPACE"], app.config)


# ---------------------------------------------------------------- SMTP


def test_smtp_without_auth_passes_sends_nothing_and_is_stored(app, smtp_server):
    app.config["SMTP_URL"] = smtp_server.url
    check = check_smtp(app)
    assert check.ok, check.line()
    assert "nothing sent" in check.summary
    assert smtp_server.messages == []
    last = stored(app)
    assert last is not None and last.ok and abs(last.at - time.time()) < 10


def test_smtp_with_auth_and_the_right_password_logs_in(app, auth_smtp_server):
    app.config["SMTP_URL"] = auth_smtp_server.url
    check = check_smtp(app)
    assert check.ok, check.line()
    assert "login accepted" in check.summary
    assert auth_smtp_server.messages == []


def test_smtp_wrong_password_fails_with_the_servers_535_and_what_to_do(app, auth_smtp_server):
    app.config["SMTP_URL"] = f"smtp://{AUTH[0]}:wrong-password@127.0.0.1:{auth_smtp_server.port}"
    check = check_smtp(app)
    assert not check.ok
    assert "535" in check.summary
    assert "password in SMTP_URL" in check.advice
    assert "wrong-password" not in check.line()
    last = stored(app)
    assert last is not None and not last.ok and "535" in last.detail


def test_smtp_server_demanding_auth_without_credentials_fails_at_mail_from(app, auth_smtp_server):
    app.config["SMTP_URL"] = f"smtp://127.0.0.1:{auth_smtp_server.port}"
    check = check_smtp(app)
    # Connecting works; the server refuses MAIL FROM (530) until we log in. The check stops
    # there (no RCPT, no DATA) and says what to do.
    assert not check.ok
    assert check.summary.startswith("mail: 530")
    assert "user:password in SMTP_URL" in check.advice
    assert auth_smtp_server.messages == []


def test_smtp_check_names_the_sender_it_tried(app, smtp_server):
    from broadside.core.site_settings import update_settings
    from webapp.extensions import db

    update_settings(db.session, sender_name="Acme", sender_email="news@acme.example",
                    postal_address="1 Main St", time_zone="UTC")
    app.config["SMTP_URL"] = smtp_server.url
    check = check_smtp(app)
    assert check.ok and "sender news@acme.example accepted" in check.summary
    assert smtp_server.messages == []


def test_smtp_wrong_port_fails_quickly_naming_host_and_port(app):
    port = free_port()
    app.config["SMTP_URL"] = f"smtp://127.0.0.1:{port}"
    started = time.monotonic()
    check = check_smtp(app)
    assert time.monotonic() - started < 5
    assert not check.ok
    assert f"127.0.0.1:{port}" in check.summary
    assert "host and port" in check.advice


def test_outbox_is_checked_when_smtp_url_is_unset(app):
    app.config["SMTP_URL"] = ""
    check = check_smtp(app)
    assert check.ok and check.name == "outbox"
    assert str(Path(app.instance_path) / "outbox") in check.summary


def test_outbox_that_cannot_be_created_fails(app):
    app.config["SMTP_URL"] = ""
    (Path(app.instance_path) / "outbox").write_text("a file where the folder should be")
    check = check_smtp(app)
    assert not check.ok
    assert "not writable" in check.summary


def test_a_check_against_another_server_is_not_reported_as_the_last_one(app, smtp_server):
    app.config["SMTP_URL"] = f"smtp://127.0.0.1:{free_port()}"
    assert not check_smtp(app).ok
    app.config["SMTP_URL"] = smtp_server.url  # the owner fixed SMTP_URL and restarted
    assert stored(app) is None


# ---------------------------------------------------------------- the others


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://news.example.com", True),
        ("http://localhost:5000", True),
        ("http://127.0.0.1:8000", True),
        ("http://news.example.com", False),
        ("https://news.example.com/?x=1", False),
        ("ftp://news.example.com", False),
    ],
)
def test_base_url_must_be_https_unless_local(url, ok):
    check = check_base_url(url)
    assert check.ok is ok, check.line()
    if not ok:
        assert check.advice


def test_configuration_shows_every_variable_with_secrets_masked():
    config = {
        "SECRET_KEY": "the-secret-key-123456",
        "METRICS_TOKEN": "metrics-token-abcdef",
        "WEBHOOK_SECRET": "webhook-secret-xyz123",
        "SMTP_URL": "smtp+starttls://mailer:smtp-pass-999@mail.example.com:587",
        "DATABASE_URL": "postgresql+psycopg://app:db-pass-777@db/broadside",
        "REDIS_URL": "redis://:redis-pass-555@cache:6379/0",
        "SEND_DELAY_MS": 200,
    }
    check = check_configuration(config)
    text = "\n".join(check.details)
    for secret in ("the-secret-key-123456", "metrics-token-abcdef", "webhook-secret-xyz123",
                   "smtp-pass-999", "db-pass-777", "redis-pass-555"):
        assert secret not in text
    assert "SMTP_URL = smtp+starttls://•••:•••@mail.example.com:587" in text
    assert "REDIS_URL = redis://:****@cache:6379/0" in text
    assert "SECRET_KEY = set (21 characters, hidden)" in text
    assert "SEND_DELAY_MS = 200" in text
    assert mask_url("smtp://mail.example.com") == "smtp://mail.example.com"


def test_passwords_in_query_strings_are_masked_too():
    config = {
        "DATABASE_URL": "postgresql://db.internal/broadside?user=app&password=db-query-pass-1",
        "REDIS_URL": "redis://cache:6379/0?password=redis-query-pass-2",
    }
    text = "\n".join(check_configuration(config).details)
    assert "db-query-pass-1" not in text and "redis-query-pass-2" not in text
    assert "DATABASE_URL = postgresql://db.internal/broadside?user=app&password=****" in text
    assert "REDIS_URL = redis://cache:6379/0?password=****" in text


def test_database_current_then_empty_then_unreachable(app, app_config, tmp_path):
    check = check_database(app)
    assert check.ok, check.line()
    assert "schema current" in check.summary

    empty = tmp_path / "empty.db"
    empty.touch()
    app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{empty}"
    check = check_database(app)
    assert not check.ok and "db upgrade" in check.advice

    app.config["SQLALCHEMY_DATABASE_URI"] = f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/x"
    started = time.monotonic()
    check = check_database(app)
    assert time.monotonic() - started < 5
    assert not check.ok and "unreachable" in check.summary and "DATABASE_URL" in check.advice


def test_worker_check_names_the_lease_holder_and_heartbeat(app, redis_client, namespace):
    assert not check_worker(redis_client, namespace).ok
    lease = Lease(redis_client, namespace, identity="box:4242:abc123")
    assert lease.try_acquire()
    check = check_worker(redis_client, namespace)
    assert check.ok
    assert "box:4242:abc123 holds the lease since" in check.summary
    assert "heartbeat 0." in check.summary


# ---------------------------------------------------------------- the command


def run_doctor(app_config, **env):
    environ = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": app_config["DATABASE_URL"],
        "REDIS_URL": app_config["REDIS_URL"],
        "SECRET_KEY": app_config["SECRET_KEY"],
        "BROADSIDE_INSTANCE_PATH": app_config["INSTANCE_PATH"],
        "BROADSIDE_NAMESPACE": app_config["BROADSIDE_NAMESPACE"],
        "DNS_RESOLVER": app_config["DNS_RESOLVER"],  # the DNS checks ask loopback, never the internet
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "webapp", "doctor"],
        env=environ, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )


def test_doctor_exits_0_when_everything_passes(app, app_config, auth_smtp_server, redis_client):
    lease = Lease(redis_client, app_config["BROADSIDE_NAMESPACE"], identity="web1:77:f00d")
    assert lease.try_acquire()
    # Renewed as a live worker renews it: the doctor's process may take longer than the
    # lease's few seconds to start on a loaded machine.
    keeper = LeaseKeeper(lease, on_lost=lambda holder: None)
    keeper.start()
    try:
        result = run_doctor(app_config, SMTP_URL=auth_smtp_server.url, BASE_URL="https://news.example.com",
                            METRICS_TOKEN="metrics-token-abcdef")
    finally:
        keeper.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line[:1] in "✓✗"] == [
        "✓ configuration", "✓ database", "✓ Redis", "✓ worker", "✓ SMTP", "✓ BASE_URL"]
    assert "web1:77:f00d holds the lease" in result.stdout
    # The default identity's DNS checks (localhost has no records) warn; they fail nothing.
    assert "6 of 10 checks passed, 4 warnings (they do not stop sending)\n" in result.stdout
    assert "! DNS SPF of Default: localhost: missing." in result.stdout
    assert AUTH[1] not in result.stdout and "metrics-token-abcdef" not in result.stdout
    assert app_config["SECRET_KEY"] not in result.stdout
    assert f"SMTP_URL = smtp://•••:•••@127.0.0.1:{auth_smtp_server.port}" in result.stdout
    # As the self-hoster wrote it (not the driver-pinned `postgresql+psycopg://` form).
    assert f"DATABASE_URL = {mask_url(app_config['DATABASE_URL'])}\n" in result.stdout
    assert auth_smtp_server.messages == []


def test_doctor_exits_1_naming_each_failure_and_what_to_do(app, app_config, auth_smtp_server):
    result = run_doctor(app_config, SMTP_URL=f"smtp://{AUTH[0]}:bad-password@127.0.0.1:{auth_smtp_server.port}",
                        BASE_URL="http://news.example.com")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "✓ database" in out and "✓ Redis" in out
    assert "✗ worker: no worker holds the sending lease → start it" in out
    assert "✗ SMTP: auth: 535" in out and "password in SMTP_URL" in out
    assert "✗ BASE_URL: http://news.example.com is not https → " in out
    assert "bad-password" not in out
    assert "3 of 10 checks passed, 4 warnings (they do not stop sending); fix: worker, SMTP, BASE_URL" in out


def test_doctor_with_a_malformed_variable_stops_with_one_line_naming_it(app_config, sqlite_template):
    result = run_doctor(app_config, SEND_DELAY_MS="fast")
    assert result.returncode != 0
    assert "SEND_DELAY_MS must be a whole number" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("backend", ["sqlite"])
def test_doctor_with_nothing_listening_at_redis_url_says_where_and_how_to_start_it(app, app_config):
    port = free_port()  # nothing listens there
    result = run_doctor(app_config, REDIS_URL=f"redis://:hunter2-redis@127.0.0.1:{port}/0")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert f"✗ Redis: not answering at redis://:****@127.0.0.1:{port}/0 (" in out
    assert "→ start it, e.g. `sudo apt-get install redis-server` (Debian/Ubuntu) or " \
           "`brew install redis && brew services start redis` (macOS)" in out
    assert "hunter2-redis" not in out + result.stderr
    assert "fix: Redis, worker" in out


@pytest.mark.parametrize(("url", "said"), [
    ("redis://127.0.0.1:6379/0", "Redis is not answering at redis://127.0.0.1:6379/0: start it, e.g. "
                                 "`sudo apt-get install redis-server`"),
    ("redis://default:pa55word@localhost:6380/2", "at redis://default:****@localhost:6380/2: start it"),
    ("rediss://cache.internal:6380/0?password=pa55word",
     "at rediss://cache.internal:6380/0?password=****: check that Redis runs there and that REDIS_URL"),
    ("unix:///run/redis/redis.sock?db=0", "at unix:///run/redis/redis.sock?db=0: start it"),
])
def test_a_missing_redis_is_named_with_its_password_masked_and_what_to_do(url, said):
    assert said in not_answering(url)
    assert "pa55word" not in not_answering(url)
