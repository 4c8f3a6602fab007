"""Helpers shared by tests in every folder (fixtures stay in the conftest modules).

Import from here, never from a conftest module.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from urllib.error import HTTPError

from flask import current_app
from sqlalchemy import func, insert, select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, Delivery, Identity, MailingList, Subscriber, Subscription
from broadside.core.models.sending import DeliveryStatus
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.identities import service as identities
from broadside.delivery.lease import Lease
from broadside.delivery.queues import Jobs, owns_key
from broadside.mail import unsubscribe_tokens as tokens
from jobs.app import from_flask
from jobs.pacing import Pacer
from jobs.runtime import Runtime
from jobs.worker import run_worker
from webapp import REPO_ROOT
from webapp.extensions import db, get_jobs

SECRET_KEY = "test-secret-key-0123456789"
OWNER_EMAIL = "owner@example.com"
OWNER_PASSWORD = "correct horse battery"


def csrf_token_from(html: str) -> str:
    match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html) or re.search(
        r'name="csrf_token" value="([^"]+)"', html
    )
    assert match, "no CSRF token on the page"
    return match.group(1)


def wait_until(condition, timeout: float = 20.0, interval: float = 0.05, message: str = ""):
    """Poll `condition` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(message or f"condition not met within {timeout}s")


def make_token(subscriber_id: int, list_id: int, broadcast_id: int | None = None, *,
               secret_key: str | None = None) -> str:
    """An unsubscribe token as the worker makes it, for the person now at `subscriber_id`
    (signed with the current app's SECRET_KEY, or the one given)."""
    joined = (db.session.scalar(select(Subscriber.created_at).where(Subscriber.id == subscriber_id))
              if 0 <= subscriber_id < 2**31 else None)
    return tokens.make_token(subscriber_id, list_id, broadcast_id, joined=joined or NOBODY_JOINED,
                             secret_key=secret_key or current_app.config["SECRET_KEY"])


# The creation moment given to a token for an id nobody has (the person it names is gone).
NOBODY_JOINED = datetime(2000, 1, 1)


def read_token(token: str) -> tokens.UnsubscribeClaim | None:
    return tokens.read_token(token, secret_key=current_app.config["SECRET_KEY"])


def unsubscribe_url(token: str, base_url: str | None = None) -> str:
    return tokens.unsubscribe_url(token, base_url or current_app.config["BASE_URL"])


def worker_runtime(app, transport, *, identity: str | None = None, hourly: HourlyCap | None = None,
                   **config) -> Runtime:
    """A stream's runtime built by hand (as `jobs.stream.Stream` builds it), for tests that
    run one slice or one maintenance pass in this process. `config` overrides the app's. The
    jobs' database session is bound to the app's engine, as `run_worker` binds it."""
    from jobs.app import from_flask
    from jobs.database import db as jobs_db

    jobs_db.bind(from_flask(app).engine)
    redis = app.extensions["broadside_redis"]
    namespace = app.config["BROADSIDE_NAMESPACE"]
    lease = Lease(redis, namespace, identity) if identity else Lease(redis, namespace)
    return Runtime(
        lease=lease, pacer=Pacer(0), transport=transport,
        hourly=hourly or HourlyCap(redis, namespace, 0), config={**app.config, **config},
        jobs=Jobs(redis, namespace), instance_path=app.instance_path,
    )


def burst_identity(app, name: str) -> None:
    """The real worker for one identity's stream, in this process, until it has nothing due
    (RQ burst mode); the signal handlers it sets are put back."""
    db.session.commit()
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert run_worker(from_flask(app), burst=True, identities=(name,)) == 0
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        db.session.expire_all()


# ---------------------------------------------------------------- lists and broadcasts


def make_list(session, size: int, name: str = "Weekly", domain: str = "example.com") -> MailingList:
    mailing_list = MailingList(name=name)
    session.add(mailing_list)
    session.flush()
    if size:
        session.execute(
            insert(Subscriber),
            [
                {"email": f"reader{i:05d}@{domain}", "name": f"Reader {i}", "attributes": {}}
                for i in range(size)
            ],
        )
        ids = session.scalars(
            select(Subscriber.id).where(Subscriber.email.like(f"%@{domain}")).order_by(Subscriber.id)
        ).all()
        session.execute(
            insert(Subscription),
            [{"subscriber_id": sid, "list_id": mailing_list.id, "status": "active"} for sid in ids],
        )
    session.commit()
    return mailing_list


def while_the_server_takes(smtp_server, email: str, statement, then=None) -> None:
    """Run `statement` (committed, on its own connection) while the SMTP server is taking the
    message to `email`, after the end of DATA and before its reply: something that happens at
    that exact moment of a send. `then()` runs right after the commit."""
    engine = db.engine

    def hook(envelope) -> None:
        if envelope.rcpt_tos == [email]:
            with engine.begin() as connection:
                connection.execute(statement)
            if then is not None:
                then()

    smtp_server.script.on_data = hook


def refuse_the_nth_body(smtp_server, n: int, reply: str) -> dict[str, int]:
    """The server answers the n-th end of DATA it handles with `reply` (counting from 1);
    returns the running count of DATA the server's handler reached."""
    count = {"n": 0}

    def at_data(envelope) -> None:
        count["n"] += 1
        if count["n"] == n:
            smtp_server.script.data_replies.append(reply)

    smtp_server.script.on_data = at_data
    return count


def start_broadcast(
    app,
    mailing_list: MailingList,
    subject: str = "Hello {{ name }}",
    body: str = "Hi **{{ name }}**, this is the news.",
    enqueue: bool = True,
) -> Broadcast:
    draft = create_draft(db.session, list_id=mailing_list.id, subject=subject, body=body)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs() if enqueue else None)


def statuses(broadcast_id: int) -> dict[str, int]:
    db.session.commit()
    rows = db.session.execute(
        select(Delivery.status, func.count())
        .where(Delivery.broadcast_id == broadcast_id)
        .group_by(Delivery.status)
    ).all()
    return {status: count for status, count in rows}


def counters(broadcast_id: int) -> dict[str, int]:
    db.session.expire_all()
    b = db.session.get(Broadcast, broadcast_id)
    return {status.value: count for status in DeliveryStatus if (count := getattr(b, f"{status}_count"))}


# ---------------------------------------------------------------- checks on a broadcast's ledger

TERMINAL = {"sent", "skipped", "failed", "unknown"}


def broadcast_row(broadcast_id: int) -> Broadcast:
    db.session.expire_all()
    broadcast = db.session.get(Broadcast, broadcast_id)
    db.session.commit()
    assert broadcast is not None, f"no broadcast {broadcast_id}"
    return broadcast


def broadcast_status(broadcast_id: int) -> str:
    db.session.expire_all()
    status = db.session.scalar(select(Broadcast.status).where(Broadcast.id == broadcast_id))
    db.session.commit()
    assert status is not None, f"no broadcast {broadcast_id}"
    return status


def emails_by_status(broadcast_id: int) -> dict[str, set[str]]:
    db.session.expire_all()
    rows = db.session.execute(
        select(Delivery.status, Subscriber.email)
        .join(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast_id)
    ).all()
    db.session.commit()
    result: dict[str, set[str]] = {}
    for status, email in rows:
        result.setdefault(status, set()).add(email)
    return result


def assert_nobody_twice(received: list[str]) -> None:
    seen: set[str] = set()
    twice = sorted({r for r in received if r in seen or seen.add(r)})
    assert not twice, f"{len(twice)} addresses received two copies, e.g. {twice[:5]}"


def assert_ledger_consistent(broadcast_id: int, received: list[str]) -> dict[str, int]:
    """Every row final, every `sent` row really received, counters == GROUP BY of the rows."""
    result = statuses(broadcast_id)
    assert set(result) <= TERMINAL, f"rows not in a final state: {result}"
    by_status = emails_by_status(broadcast_id)
    missing = by_status.get("sent", set()) - set(received)
    assert not missing, f"rows marked sent that the server never received: {sorted(missing)[:5]}"
    for status in ("skipped", "failed"):
        wrongly = by_status.get(status, set()) & set(received)
        assert not wrongly, f"rows marked {status} that were received: {sorted(wrongly)[:5]}"
    assert counters(broadcast_id) == result, "the broadcast's counters disagree with its rows"
    total = broadcast_row(broadcast_id).total
    assert sum(result.values()) == total
    return result


# ---------------------------------------------------------------- a browser without a browser

class Browser:
    """urllib with a cookie jar: a signed-in owner's session, over real HTTP."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def request(self, method: str, path: str, data: bytes | None = None,
                headers: dict | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers=headers or {})
        try:
            with self.opener.open(request, timeout=15) as response:
                return response.status, response.read().decode()
        except HTTPError as error:
            with error:
                return error.code, error.read().decode()

    def submit(self, path: str, fields: dict[str, str]) -> tuple[int, str]:
        """POST a form (redirects followed, as a browser would): (status, page)."""
        body = urllib.parse.urlencode(fields).encode()
        return self.request("POST", path, body, {"Content-Type": "application/x-www-form-urlencoded"})

    def form(self, path: str, fields: dict[str, str]) -> int:
        return self.submit(path, fields)[0]

    def sign_in(self, email: str, password: str) -> Browser:
        token = csrf_token_from(self.request("GET", "/login")[1])
        assert self.form("/login", {"email": email, "password": password, "csrf_token": token}) == 200
        return self


# ---------------------------------------------------------------- a worker process

LEAN_WORKER = (sys.executable, "-m", "jobs")
FLASK_WORKER = (sys.executable, "-m", "flask", "--app", "webapp", "worker")


class WorkerProcess:
    """The worker as the Procfile runs it (`python -m jobs`) as a real subprocess, configured
    like the test app; `command=FLASK_WORKER` runs `flask --app webapp worker` instead."""

    def __init__(self, app_config: dict, extra_env: dict[str, str] | None = None,
                 args: tuple[str, ...] = (), command: tuple[str, ...] = LEAN_WORKER) -> None:
        self.args = args  # e.g. ("--identity", "Product")
        self.command = command
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "PYTEST_"))}
        env.update(
            DATABASE_URL=app_config["DATABASE_URL"],
            REDIS_URL=app_config["REDIS_URL"],
            SECRET_KEY=app_config["SECRET_KEY"],
            BROADSIDE_NAMESPACE=app_config["BROADSIDE_NAMESPACE"],
            BROADSIDE_INSTANCE_PATH=app_config["INSTANCE_PATH"],
            SEND_DELAY_MS=str(app_config.get("SEND_DELAY_MS", "0")),
            SMTP_URL=str(app_config.get("SMTP_URL", "")),
            BASE_URL=str(app_config.get("BASE_URL", "http://localhost:5000")),
            RETRY_BASE_SECONDS=str(app_config.get("RETRY_BASE_SECONDS", "0.05")),
            PROVIDER_ENDPOINTS_ALLOW_PRIVATE=str(app_config.get("PROVIDER_ENDPOINTS_ALLOW_PRIVATE", "0")),
            PYTHONUNBUFFERED="1",
        )
        env.update(extra_env or {})
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(app_config["INSTANCE_PATH"]) / f"worker-{uuid.uuid4().hex[:6]}.log"

    def start(self) -> WorkerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # closed in stop()
        self.proc = subprocess.Popen(
            [*self.command, *self.args],
            cwd=REPO_ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, group: bool = False) -> None:
        """SIGKILL the main process (or its whole process group)."""
        assert self.proc is not None
        if group:
            os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            self.proc.kill()
        self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        if hasattr(self, "_log"):
            self._log.close()


# ---------------------------------------------------------------- signed generic webhooks


def webhook_body(**fields) -> bytes:
    """A body for POST /webhooks/events: the fields given, with a fresh unique `id` unless one
    is given (the webhook counts each id once)."""
    import json

    return json.dumps({"id": f"evt-{uuid.uuid4().hex}", **fields}).encode()


def webhook_headers(body: bytes, secret: str, timestamp: int | str | None = None) -> dict[str, str]:
    """Headers a sender puts on POST /webhooks/events, computed here as the README tells a
    sender to (independently of the app's code): `X-Broadside-Timestamp` (now unless given)
    and `X-Broadside-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">`."""
    import hashlib
    import hmac

    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Broadside-Timestamp": stamp,
            "X-Broadside-Signature": f"sha256={digest}"}


def forget_namespace(redis, namespace: str) -> None:
    """Delete every Redis key of a test's or a bench's namespace: ours (queues' markers,
    leases, throttles) and RQ's (queues, registries, jobs, results, executions, workers), which
    all carry the namespace (`broadside.delivery.queues.owns_key`). A job still queued or
    failed when the test ends has no TTL, so without this every run would leave them behind.
    Used by the tests' `namespace` fixture and by the benches."""
    doomed = [name for name in redis.scan_iter(f"*{namespace}*", count=1000)
              if owns_key(namespace, name.decode() if isinstance(name, bytes) else name)]
    for start in range(0, len(doomed), 500):
        redis.delete(*doomed[start:start + 500])


def make_identity(name: str, url: str, delay_ms: int, email: str = "news@product.example") -> Identity:
    """A sending identity saved as the owner's page saves one (validated by the service)."""
    return identities.create(db.session, identities.parse_input(
        {"name": name, "from": f"{name} <{email}>", "transport": url, "delay_ms": delay_ms}))
