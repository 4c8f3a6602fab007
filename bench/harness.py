"""What every benchmark needs: private databases, a private Redis namespace, a populated list,
a broadcast pressed "send", and the real worker as a subprocess whose peak memory is watched.

Everything made here is registered for clean-up (`Bench.close()`): temp files, the PostgreSQL
database (dropped WITH (FORCE)), the Redis keys of the namespace, and any process still alive.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

POSTGRES_URL = os.environ.get("BROADSIDE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("BROADSIDE_BENCH_REDIS", "redis://127.0.0.1:6379/0")
SECRET_KEY = "bench-secret-key-0123456789"
OWNER = ("owner@example.com", "bench password 123")
CITIES = ["Paris", "Lyon", "Oslo", "Rome", "Kiel", "Graz", "Porto", "Bern"]


def proc_status(pid: int, field_name: str) -> float | None:
    """A /proc/<pid>/status memory figure (VmHWM, VmRSS) in MB, or None once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


@dataclass
class Bench:
    """One run's private resources."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="broadside-bench-")))
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)
    # What benches of one run hand to each other (bench/million.py's `shared`: the million
    # built once per database), by key.
    shared: dict = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return f"bench-{self.run_id}"

    def redis(self):
        from redis import Redis

        return Redis.from_url(REDIS_URL)

    # ------------------------------------------------------------ databases

    def sqlite_url(self, name: str) -> str:
        """A SQLite file of this run's; each bench of a run names its own (run_all runs them
        all in one run: a shared name would hand one bench another's leftover database)."""
        return f"sqlite:///{self.workdir / (name + '.db')}"

    def postgres_url(self, name: str) -> str:
        import psycopg

        database = f"broadside_bench_{self.run_id}_{name}"
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')

        def drop() -> None:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')

        self.cleanups.append(drop)
        return POSTGRES_URL.rsplit("/", 1)[0] + f"/{database}"

    def config(self, database_url: str, **extra) -> dict:
        return {
            "INSTANCE_PATH": str(self.workdir / "instance"),
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "SECRET_KEY": SECRET_KEY,
            "BROADSIDE_NAMESPACE": self.namespace,
            "SEND_DELAY_MS": "0",
            **extra,
        }

    def app(self, database_url: str, migrate: bool = True):
        from flask_migrate import upgrade

        from webapp import create_app
        from webapp.extensions import db

        app = create_app(self.config(database_url), environ={})
        if migrate:
            with app.app_context():
                upgrade()
                db.session.remove()
        self.cleanups.append(lambda: _dispose(app))
        return app

    # ------------------------------------------------------------ processes

    def env(self, database_url: str, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "PYTEST_"))}
        env.update(
            DATABASE_URL=database_url,
            REDIS_URL=REDIS_URL,
            SECRET_KEY=SECRET_KEY,
            BROADSIDE_NAMESPACE=self.namespace,
            BROADSIDE_INSTANCE_PATH=str(self.workdir / "instance"),
            BASE_URL="http://localhost:5000",
            PYTHONUNBUFFERED="1",
            PYTHONPATH=str(ROOT),
        )
        env.update(extra)
        return env

    def worker(self, database_url: str, *, smtp_url: str, delay_ms: int = 0, burst: bool = True,
               label: str = "worker") -> WorkerProcess:
        env = self.env(database_url, SEND_DELAY_MS=str(delay_ms), SMTP_URL=smtp_url)
        log = self.workdir / f"{label}-{uuid.uuid4().hex[:6]}.log"
        process = WorkerProcess(env, log, burst)
        self.processes.append(process.proc)
        return process

    # ------------------------------------------------------------ clean-up

    def forget_jobs(self) -> None:
        """Remove this run's Redis keys (queues, jobs, leases), with no worker running: a
        bench that hands its database on leaves no job of its own for the next bench's worker
        (a queued cancel of its broadcast, say) to pick up."""
        from tests.helpers import forget_namespace

        client = self.redis()
        try:
            forget_namespace(client, self.namespace)
        finally:
            client.close()

    def close(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    proc.kill()
                proc.wait(10)
        for cleanup in reversed(self.cleanups):
            try:
                cleanup()
            except Exception as exc:  # clean up as much as possible
                print(f"clean-up step failed: {exc!r}", file=sys.stderr)
        self.cleanups.clear()
        try:
            self.forget_jobs()
        except Exception as exc:
            print(f"could not clear Redis namespace {self.namespace}: {exc!r}", file=sys.stderr)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _dispose(app) -> None:
    from webapp.extensions import db

    with app.app_context():
        db.session.remove()
        db.engine.dispose()
    app.extensions["broadside_redis"].close()


LAUNCH_WORKER = ("import sys; from webapp import create_app; from jobs.app import from_flask; "
                 "from jobs.worker import run_worker; app = create_app(); "
                 "sys.exit(run_worker(from_flask(app), burst='--burst' in sys.argv))")


class WorkerProcess:
    """The worker of the Procfile (`python -m jobs [--burst]`, the lean worker), its own process
    group, with its peak resident memory (VmHWM) sampled from /proc while it runs."""

    def __init__(self, env: dict[str, str], log_path: Path, burst: bool) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # closed in wait()/stop()
        # A tree from before the lean worker (bench/ab_throughput.py's "before") has no
        # `python -m jobs`: there, what `flask --app webapp worker` runs, called directly.
        lean = (ROOT / "jobs" / "__main__.py").exists()
        command = [sys.executable, "-m", "jobs"] if lean else [sys.executable, "-c", LAUNCH_WORKER]
        if burst:
            command.append("--burst")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.peak_mb = 0.0
        self._watching = True
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while self._watching and self.proc.poll() is None:
            value = proc_status(self.proc.pid, "VmHWM")
            if value is not None:
                self.peak_mb = max(self.peak_mb, value)
            time.sleep(0.1)

    @property
    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RuntimeError(f"the worker did not finish within {timeout:.0f} s; log:\n"
                               + self.output[-3000:]) from None
        self._finish()
        return code

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM (a deploy), after one last memory sample."""
        value = proc_status(self.proc.pid, "VmHWM")
        if value is not None:
            self.peak_mb = max(self.peak_mb, value)
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill_group(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._finish()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self._finish()

    def _finish(self) -> None:
        self._watching = False
        self._watcher.join(2)
        if not self._log.closed:
            self._log.close()


# ---------------------------------------------------------------- data

def insert_people(session, count: int, *, prefix: str = "reader", width: int = 6,
                  domain: str = "bench.example", city: bool = True) -> None:
    """`count` subscribers, `{prefix}{i:0{width}d}@{domain}` named "Reader {i}" for i in
    0..count-1 (ids in that order), with {"city": CITIES[i % 8]} as attributes (or none), in
    one INSERT ... SELECT over a generated series: no row passes through Python, so a million
    takes seconds (the executemany of Python dicts it replaces took minutes on PostgreSQL)."""
    from million import pick, series
    from sqlalchemy import text

    from broadside.core.timeutil import utcnow

    if count <= 0:
        return
    backend = session.get_bind().dialect.name
    i = "(s.x - 1)"
    if backend == "sqlite":
        number = f"printf('%0{width}d', {i})"
        json_object = "json_object"
    else:
        number = f"lpad({i}::text, greatest({width}, length({i}::text)), '0')"  # lpad alone cuts
        json_object = "json_build_object"
    attributes = f"{json_object}('city', {pick(CITIES, i)})" if city else f"{json_object}()"
    session.execute(text(f"""
        INSERT INTO subscribers (email, name, attributes, created_at, soft_bounce_count)
        SELECT :prefix || {number} || :at, 'Reader ' || {i}, {attributes}, :now, 0
        FROM {series(backend, count)} ORDER BY s.x"""),
        {"prefix": prefix, "at": "@" + domain, "now": utcnow()})


def populate(app, subscribers: int, lists: dict[str, int], domain: str = "bench.example",
             **people) -> dict[str, int]:
    """`subscribers` people (reader000000@domain...; `insert_people`, which takes `people`),
    and lists holding the first N of them, all `active`. Returns {list name: list id}."""
    from sqlalchemy import insert, literal, select

    from broadside.core.models import MailingList, Subscriber, Subscription
    from webapp.extensions import db

    with app.app_context():
        session = db.session
        insert_people(session, subscribers, domain=domain, **people)
        ids: dict[str, int] = {}
        for name, size in lists.items():
            mailing_list = MailingList(name=name)
            session.add(mailing_list)
            session.flush()
            first = select(Subscriber.id).where(Subscriber.email.like(f"%@{domain}")) \
                .order_by(Subscriber.id).limit(size).subquery()
            session.execute(insert(Subscription).from_select(
                ["subscriber_id", "list_id", "status"],
                select(first.c.id, literal(mailing_list.id), literal("active")),
            ))
            ids[name] = mailing_list.id
        session.commit()
        session.remove()
        if db.engine.dialect.name == "postgresql":
            # The bulk insert above would set autovacuum on these tables during the first
            # measurements (seen: the 1k throughput pairs right after populating 100,000
            # people ran slower than the 10k ones); do that work now, as a settled database
            # would have done long before a send.
            with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.exec_driver_sql("VACUUM (ANALYZE) subscribers, subscriptions, mailing_lists")
    return ids


def press_send(app, list_id: int, *, enqueue: bool = True, subject: str | None = None) -> tuple[int, float]:
    """A draft with a realistic newsletter body, then `send_broadcast` (freeze + snapshot +
    queue). Returns the broadcast id and the seconds `send_broadcast` took."""
    from render import BODY  # bench/render.py: the 4 KB newsletter the renderer is timed on

    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from webapp.extensions import db, get_jobs

    with app.app_context():
        draft = create_draft(db.session, list_id=list_id,
                             subject=subject or "News for {{ name or \"you\" }}", body=BODY)
        started = time.perf_counter()
        broadcast = send_broadcast(db.session, draft.id, default_from="Bench <news@bench.example>",
                                   jobs=get_jobs() if enqueue else None)
        seconds = time.perf_counter() - started
        broadcast_id = broadcast.id
        db.session.remove()
    return broadcast_id, seconds


def press_send_page(app, list_id: int, views: int = 3) -> tuple[int, list[float], float, float]:
    """What the owner does at a million, through the web app's own views (Flask's test
    client, in this process, logged in): a draft with the realistic body, its confirmation
    page (GET /broadcasts/<id>/send: who receives it and who is skipped, counted), then Send
    pressed (POST: the checks that block a send, the freeze, the audience decided, the job
    queued). The page is viewed `views` times (one view is one sample of a noisy machine).
    Returns the broadcast id, the seconds each view of the page took, the seconds the press
    took, and the moment (`time.perf_counter`) the press began."""
    import re

    from render import BODY

    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.core.site_settings import get_settings, update_settings
    from webapp.extensions import db

    with app.app_context():
        if not (get_settings(db.session).postal_address or "").strip():
            update_settings(db.session, sender_name="Bench", sender_email="news@bench.example",
                            postal_address="Bench Ltd, 1 Main Street, Springfield",
                            time_zone="UTC")
        draft_id = create_draft(db.session, list_id=list_id, subject="News for {{ name or \"you\" }}",
                                body=BODY).id
        db.session.remove()
    client = app.test_client()

    def token(path: str) -> str:
        found = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', client.get(path).text)
        assert found, f"no CSRF token on {path}"
        return found.group(1)

    response = client.post("/login", data={"email": OWNER[0], "password": OWNER[1],
                                           "csrf_token": token("/login")})
    assert response.status_code == 302, response.status_code
    page_s = []
    for _ in range(views):
        started = time.perf_counter()
        page = client.get(f"/broadcasts/{draft_id}/send")
        page_s.append(time.perf_counter() - started)
        assert page.status_code == 200 and "Send now to" in page.text, page.text[-2000:]
    found = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page.text)
    assert found
    pressed = time.perf_counter()
    response = client.post(f"/broadcasts/{draft_id}/send",
                           data={"csrf_token": found.group(1), "queue_anyway": "y"})
    press_s = time.perf_counter() - pressed
    assert response.status_code == 302, response.text[-2000:]
    return draft_id, page_s, press_s, pressed


def broadcast_state(app, broadcast_id: int) -> dict:
    from sqlalchemy import func, select

    from broadside.core.models import Broadcast, Delivery
    from webapp.extensions import db

    with app.app_context():
        broadcast = db.session.get(Broadcast, broadcast_id)
        counts = dict(db.session.execute(
            select(Delivery.status, func.count()).where(Delivery.broadcast_id == broadcast_id)
            .group_by(Delivery.status)).all())
        state = {"status": broadcast.status, "total": broadcast.total, "counts": counts,
                 "pause_reason": broadcast.pause_reason}
        db.session.remove()
    return state


def steer(app, broadcast_id: int, action: str) -> None:
    """pause / resume / cancel through the same domain functions the pages call."""
    from broadside.campaigns.broadcasts import service
    from webapp.extensions import db, get_jobs

    with app.app_context():
        extra = {"jobs": get_jobs()} if action == "resume" else {}  # a resume queues its slice
        getattr(service, f"{action}_broadcast")(db.session, broadcast_id, **extra)
        db.session.remove()
