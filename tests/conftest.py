"""Shared fixtures: the app on SQLite and PostgreSQL, a real Redis, a real SMTP server,
a live HTTP server, a worker process, and Chromium through Playwright.

Expensive things are made once per session (a migrated SQLite template file, a migrated
PostgreSQL database, the SMTP server); each test gets a clean copy or clean tables.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from flask import Flask
from flask_migrate import upgrade
from redis import Redis
from werkzeug.security import generate_password_hash
from werkzeug.serving import make_server

from broadside.core.models import Owner
from jobs.app import from_flask
from jobs.worker import run_worker
from tests.dns_server import DnsServer
from tests.helpers import (
    OWNER_EMAIL,
    OWNER_PASSWORD,
    SECRET_KEY,
    WorkerProcess,
    csrf_token_from,
    forget_namespace,
)
from tests.imap_server import Dovecot
from tests.own_apps import own_app, share_url_builders
from tests.private_redis import private_redis  # noqa: F401  (a fixture for every folder)
from tests.smtp_server import SmtpServer, free_port
from webapp import REPO_ROOT, create_app
from webapp.extensions import db

POSTGRES_URL = os.environ.get("BROADSIDE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
share_url_builders()  # every test makes its own app: its routes' builders are made once


def pytest_collection_modifyitems(config, items) -> None:
    """The long tests (marked slow: kill loops, the API's property run) first, so they start
    while the rest is still spread over the processes, instead of ending the run alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


REDIS_URL = os.environ.get("BROADSIDE_TEST_REDIS", "redis://127.0.0.1:6379/0")
RUN_ID = uuid.uuid4().hex[:8]


def _base_config(tmp_path: Path, database_url: str, namespace: str) -> dict:
    return {
        "TESTING": True,
        "INSTANCE_PATH": str(tmp_path / "instance"),
        "DATABASE_URL": database_url,
        "REDIS_URL": REDIS_URL,
        "SECRET_KEY": SECRET_KEY,
        "BROADSIDE_NAMESPACE": namespace,
        "SEND_DELAY_MS": "0",
        "RETRY_BASE_SECONDS": "0.05",
        # The public sign-up answer's floor (webapp.steady_answers) is a quarter of a second;
        # its own test sets one, the rest need not wait.
        "SIGNUP_ANSWER_SECONDS": 0,
        # The fake providers (tests/provider_servers.py) listen on loopback: ?endpoint=127.0.0.1
        "PROVIDER_ENDPOINTS_ALLOW_PRIVATE": "1",
    }


# ---------------------------------------------------------------- databases (made once)

@pytest.fixture(scope="session")
def redis_client() -> Iterator[Redis]:
    client = Redis.from_url(REDIS_URL)
    client.ping()
    yield client
    for key in client.scan_iter(f"*bstest-{RUN_ID}*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sqlite-template")
    path = root / "template.db"
    app = create_app(_base_config(root, f"sqlite:///{path}", f"bstest-{RUN_ID}-t"), environ={})
    with app.app_context():
        upgrade()
        db.engine.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_database(tmp_path_factory) -> Iterator[str]:
    """A private, migrated database for this run, dropped at the end."""
    name = f"broadside_test_{RUN_ID}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    root = tmp_path_factory.mktemp("pg-template")
    app = create_app(_base_config(root, url, f"bstest-{RUN_ID}-t"), environ={})
    with app.app_context():
        upgrade()
        db.engine.dispose()
    yield url
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_EMPTYING: dict[str, str] = {}  # database url -> the statements that empty it
_EMPTIED: dict[str, int] = {}  # database url -> resets since its last TRUNCATE
TRUNCATE_EVERY = 200


def _truncate_postgres(url: str) -> None:
    """Empty every table and restart every id, as a fresh migrated database has them.

    DELETE with the foreign-key triggers off (session_replication_role = replica) and the
    sequences set back, in one round trip: a TRUNCATE of the ~30 tables gives each a new file
    set and cost ~20 times as much (1.2 s against 65 ms under load), paid by every PostgreSQL
    test. The dead rows DELETE leaves are cleared by a TRUNCATE every TRUNCATE_EVERY resets."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename <> 'alembic_version'"
            )
        ] if url not in _EMPTYING or _EMPTIED[url] >= TRUNCATE_EVERY else []
        if tables:
            conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
            sequences = [row[0] for row in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'")]
            _EMPTYING[url] = "".join(
                ["SET session_replication_role = replica;"]
                + [f'DELETE FROM "{table}";' for table in tables]
                + [f"SELECT setval('\"{name}\"', 1, false);" for name in sequences]
                + ["SET session_replication_role = DEFAULT;"])
            _EMPTIED[url] = 0
            return
        conn.execute(_EMPTYING[url])
        _EMPTIED[url] += 1


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def database_url(request, backend, tmp_path) -> str:
    if backend == "sqlite":
        template = request.getfixturevalue("sqlite_template")
        path = tmp_path / "broadside.db"
        shutil.copyfile(template, path)
        return f"sqlite:///{path}"
    url = request.getfixturevalue("postgres_database")
    _truncate_postgres(url)
    return url


@pytest.fixture
def namespace(redis_client) -> Iterator[str]:
    """A private Redis namespace per test (queues, lease, throttles), deleted afterwards."""
    ns = f"bstest-{RUN_ID}-{uuid.uuid4().hex[:6]}"
    yield ns
    # RQ's own job and worker keys of the namespace too: a job left queued or failed has no
    # TTL, and each suite run left ~250 of them. (6ae35b2 took this out, suspecting it of
    # stalling other tests' workers; the stall was RQ's teardown racing its command listener,
    # fixed in c407ef2, and it happened without this too.)
    forget_namespace(redis_client, ns)


# ---------------------------------------------------------------- the app

@pytest.fixture(scope="session")
def _dns_server_session() -> Iterator[DnsServer]:
    with DnsServer() as server:
        yield server


@pytest.fixture
def dns_server(_dns_server_session) -> DnsServer:
    """The app's DNS_RESOLVER: a DNS server on loopback, emptied for each test (every name
    NXDOMAIN until a test adds records), so no check ever asks the internet."""
    _dns_server_session.clear()
    return _dns_server_session


@pytest.fixture
def app_config(tmp_path, database_url, namespace, dns_server) -> dict:
    """Tests may change this mapping before asking for `app`."""
    return {**_base_config(tmp_path, database_url, namespace), "DNS_RESOLVER": dns_server.address}


@pytest.fixture
def app(app_config) -> Iterator[Flask]:
    with own_app(app_config) as app:
        yield app


@pytest.fixture
def db_session(app):
    return db.session


POSTAL_ADDRESS = "Acme Ltd\n1 Main Street\nSpringfield"


@pytest.fixture
def postal_address(app) -> str:
    """Settings' postal address, which every email prints: automations cannot be enabled, nor
    their messages sent, without one (as a broadcast cannot be sent)."""
    from broadside.core.site_settings import get_settings

    get_settings(db.session).postal_address = POSTAL_ADDRESS
    db.session.commit()
    return POSTAL_ADDRESS


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def owner(app, owner_password_hash):
    """The owner, stored with a hash made once per run (create_owner would spend 70 ms of
    scrypt on every test that signs in; test_auth.py checks the cost real owners get)."""
    owner = Owner(email=OWNER_EMAIL, password_hash=owner_password_hash)
    db.session.add(owner)
    db.session.commit()
    return owner


@pytest.fixture(scope="session")
def owner_password_hash() -> str:
    """OWNER_PASSWORD by scrypt at a low cost: signing in checks it like any hash (the cost
    travels inside it), through the real form, in about 1 ms instead of 70."""
    return generate_password_hash(OWNER_PASSWORD, method="scrypt:1024:8:1")


@pytest.fixture
def logged_in_client(client, owner):
    """A test client signed in as the owner, through the real login form."""
    page = client.get("/login")
    response = client.post(
        "/login",
        data={"email": OWNER_EMAIL, "password": OWNER_PASSWORD, "csrf_token": csrf_token_from(page.text)},
    )
    assert response.status_code == 302, response.text
    return client


@pytest.fixture
def api_headers(app, owner) -> dict[str, str]:
    from broadside.core.accounts import create_token

    _, plain = create_token(db.session, owner.id, "tests")
    return {"Authorization": f"Bearer {plain}"}


@pytest.fixture
def make_person(app, owner_password_hash):
    """make_person(role, email=None, name=""): a person of that role who signs in with
    OWNER_PASSWORD (stored as the owner fixture is, with the run's cheap hash)."""
    def make(role: str, email: str | None = None, name: str = "") -> Owner:
        person = Owner(email=email or f"{role}@example.com", password_hash=owner_password_hash,
                       role=role, name=name)
        db.session.add(person)
        db.session.commit()
        return person
    return make


@pytest.fixture
def sign_in_as(app, make_person):
    """sign_in_as(role, email=None): a new test client signed in, through the real login
    form, as a new person of that role (the person is `client.person`)."""
    def sign_in(role: str, email: str | None = None):
        person = make_person(role, email)
        client = app.test_client()
        page = client.get("/login")
        response = client.post("/login", data={"email": person.email, "password": OWNER_PASSWORD,
                                                "csrf_token": csrf_token_from(page.text)})
        assert response.status_code == 302, response.text
        client.person = person
        return client
    return sign_in


@pytest.fixture
def token_headers_as(app, make_person):
    """token_headers_as(role, read_only=False, email=None): API headers with a new token of a
    new person of that role."""
    from broadside.core.accounts import create_token

    def headers(role: str, read_only: bool = False, email: str | None = None) -> dict[str, str]:
        person = make_person(role, email)
        _, plain = create_token(db.session, person.id, f"{role} token", read_only=read_only)
        return {"Authorization": f"Bearer {plain}"}
    return headers


# ---------------------------------------------------------------- SMTP

@pytest.fixture(scope="session")
def _smtp_server_session() -> Iterator[SmtpServer]:
    server = SmtpServer().start()
    yield server
    server.stop()


@pytest.fixture
def smtp_server(_smtp_server_session) -> SmtpServer:
    """The shared recording SMTP server, emptied and un-scripted for this test."""
    _smtp_server_session.reset()
    return _smtp_server_session


# ---------------------------------------------------------------- processes

class LiveServer:
    def __init__(self, app: Flask) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = make_server("127.0.0.1", self.port, app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> LiveServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(5)


@pytest.fixture
def live_server(app) -> Iterator[LiveServer]:
    """The app served over real HTTP on a free loopback port."""
    server = LiveServer(app).start()
    yield server
    server.stop()


@pytest.fixture
def worker_factory(app_config, smtp_server) -> Iterator:
    """Start real worker processes; all are killed at the end of the test."""
    workers: list[WorkerProcess] = []
    app_config.setdefault("SMTP_URL", smtp_server.url)

    def start(*args: str, **extra_env: str) -> WorkerProcess:
        config = {**app_config}
        config.setdefault("SMTP_URL", smtp_server.url)
        worker = WorkerProcess(config, extra_env, args).start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


# ---------------------------------------------------------------- browser

@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    # Debian's Chromium; never `playwright install` (it downloads a browser and fails here).
    return {
        **browser_type_launch_args,
        "executable_path": os.environ.get("BROADSIDE_CHROMIUM", "/usr/bin/chromium"),
        "args": [
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
        ],
    }


@pytest.fixture
def screenshot_dir() -> Path:
    """Screenshots for reviewers, in a git-ignored folder."""
    path = REPO_ROOT / "test-artifacts" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def run_worker_burst(app, smtp_server):
    """Run the real worker in this process until the queues are empty (RQ burst mode)."""
    app.config["SMTP_URL"] = app.config.get("SMTP_URL") or smtp_server.url
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def run() -> int:
        try:
            return run_worker(from_flask(app), burst=True)
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
            db.session.expire_all()

    return run



# ---------------------------------------------------------------- IMAP (bounce mailboxes)

@pytest.fixture(scope="session")
def _dovecot_session() -> Iterator[Dovecot]:
    server = Dovecot().start()
    yield server
    server.stop()


@pytest.fixture
def dovecot(_dovecot_session) -> Dovecot:
    """A private Dovecot (one per test session) whose mailbox is emptied for this test."""
    _dovecot_session.clear()
    return _dovecot_session


@pytest.fixture(scope="module", autouse=True)
def _leaks_found_in_their_module() -> Iterator[None]:
    """Collect garbage as each module ends: a connection or socket a test left open is then
    finalised (a ResourceWarning, an error in this suite) in the module that leaked it, not in
    whatever test the collector happened to run in."""
    yield
    gc.collect()
