"""More than one machine, in network namespaces the test makes itself: two web processes
(gunicorn, on "web1" and "web2") and two workers (`python -m jobs`, on "worker1" and
"worker2"), each namespace a host with its own address on a bridge, PostgreSQL, Redis and the
SMTP sink listening on the bridge's address only, so everything crosses the veth links.

- A session signed in on web1 works on web2, and a CSRF token from web1's page too (shared
  SECRET_KEY, sessions in the database); settings saved through web1 show on web2 at once; a
  failed sign-in counted on web1 is counted on web2 (throttles in Redis), both under the
  client's address the test's "proxy" forwards (TRUSTED_PROXIES), as is the audit row of a
  change made through web2; signing out through web2 ends the session on web1. Each host has
  an instance folder of its own: none of this needs a shared disk.
- Two identities, a broadcast through each, both workers serving both: each worker host is
  killed once (every process in its namespace, SIGKILL) while both broadcasts send, and
  started again; the other host takes the streams over when the dead one's leases expire.
  Both broadcasts finish, nobody received a broadcast twice, and every row is final: the
  rows in flight at a kill are `unknown`, never sent again.

Skipped only where namespaces cannot be made (not root, no `ip netns`); CI runs as root.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from flask_migrate import upgrade
from redis import Redis
from sqlalchemy import select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import AuditEntry, Broadcast, MailingList, Owner, OwnerSession
from tests.helpers import (
    OWNER_EMAIL,
    OWNER_PASSWORD,
    SECRET_KEY,
    assert_ledger_consistent,
    assert_nobody_twice,
    csrf_token_from,
    make_identity,
    make_list,
    wait_until,
)
from tests.netns_hosts import BridgePostgres, BridgeRedis, BridgeSmtp, Hosts, unavailable
from tests.own_apps import own_app
from webapp import REPO_ROOT
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.slow

HOSTS = ("web1", "web2", "worker1", "worker2")
RECIPIENTS = 40
PACE_MS = 200  # each stream: ~8 s for its 40, long enough to kill each worker host mid-send
WEB_PORT = 8000
NAMESPACE = "broadside"
CLIENT = "203.0.113.60"  # the address the test's "proxy" (the bridge's side) forwards for


class Installation:
    """The hosts, the shared services on the bridge, and the environment every process gets."""

    def __init__(self, hosts: Hosts, root: Path) -> None:
        self.hosts = hosts
        self.root = root
        self.closers: list[Callable[[], None]] = []
        try:
            self.redis = BridgeRedis(hosts.bridge_address, root / "redis")
            self.closers.append(self.redis.stop)
            self.postgres = BridgePostgres(hosts.bridge_address, hosts.subnet)
            self.closers.append(self.postgres.stop)
            self.smtp = BridgeSmtp(hosts.bridge_address).start()
            self.closers.append(self.smtp.stop)
        except BaseException:
            self.close()
            raise

    def env(self, host: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "PYTEST_"))}
        instance = self.root / host / "instance"  # each host its own: nothing shared on disk
        instance.mkdir(parents=True, exist_ok=True)
        env.update(DATABASE_URL=self.postgres.url, REDIS_URL=self.redis.url, SECRET_KEY=SECRET_KEY,
                   BROADSIDE_NAMESPACE=NAMESPACE, BROADSIDE_INSTANCE_PATH=str(instance),
                   BASE_URL=f"http://{self.hosts.address['web1']}:{WEB_PORT}",
                   SMTP_URL=self.smtp.url, SEND_DELAY_MS=str(PACE_MS), RETRY_BASE_SECONDS="0.05",
                   TRUSTED_PROXIES=self.hosts.bridge_address, PYTHONUNBUFFERED="1")
        return env

    def config(self) -> dict:
        env = self.env("setup")
        return {"TESTING": True, "INSTANCE_PATH": env["BROADSIDE_INSTANCE_PATH"],
                **{k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "BROADSIDE_NAMESPACE",
                                       "BASE_URL", "SMTP_URL", "SEND_DELAY_MS")}}

    def start(self, host: str, argv: list[str]) -> None:
        self.hosts.run(host, argv, self.env(host), self.root / f"{host}.log", REPO_ROOT)

    def start_web(self, host: str) -> str:
        gunicorn = str(Path(sys.executable).parent / "gunicorn")
        self.start(host, [gunicorn, "--bind", f"{self.hosts.address[host]}:{WEB_PORT}", "--workers", "1",
                          "--threads", "4", "webapp:create_app()"])
        return f"http://{self.hosts.address[host]}:{WEB_PORT}"

    def start_worker(self, host: str) -> None:
        self.start(host, [sys.executable, "-m", "jobs"])

    def redis_client(self) -> Redis:
        return Redis.from_url(self.redis.url, socket_timeout=5)

    def log(self, host: str) -> str:
        path = self.root / f"{host}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def close(self) -> None:
        for stop in reversed(self.closers):
            try:
                stop()
            except Exception:
                pass  # the rest must still be stopped


@pytest.fixture
def installation(tmp_path) -> Iterator[Installation]:
    why_not = unavailable()
    if why_not:
        pytest.skip(why_not)
    hosts = Hosts(HOSTS)
    built: Installation | None = None
    try:
        hosts.open()
        built = Installation(hosts, tmp_path)
        yield built
    finally:
        try:
            hosts.close()  # every process on every host first, then the services they used
        finally:
            if built is not None:
                built.close()


def answers(url: str) -> bool:
    try:
        return requests.get(url + "/healthz", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def forwarded(cookie: str | None = None) -> dict:
    """A request as the proxy (the bridge's address, TRUSTED_PROXIES) sends it for CLIENT."""
    return {"headers": {"X-Forwarded-For": CLIENT}, "cookies": {"session": cookie} if cookie else {},
            "allow_redirects": False, "timeout": 15}


def prepare(install: Installation, owner_password_hash: str) -> tuple[int, int]:
    """Migrate the shared database and fill it: the owner, a second identity, a list of
    RECIPIENTS per identity and a broadcast to each, queued: (alpha's id, beta's id)."""
    import psycopg

    with psycopg.connect(install.postgres.server_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE broadside")
    with own_app(install.config()) as app:
        upgrade()
        db.session.add(Owner(email=OWNER_EMAIL, password_hash=owner_password_hash))
        product = make_identity("Product", install.smtp.url, PACE_MS)
        alpha = make_list(db.session, RECIPIENTS, name="Alpha", domain="alpha.example")
        beta = make_list(db.session, RECIPIENTS, name="Beta", domain="beta.example")
        ids = []
        for mailing_list, identity_id in ((alpha, None), (beta, product.id)):
            draft = create_draft(db.session, list_id=mailing_list.id, subject="Hello {{ name }}",
                                 body="The news.", identity_id=identity_id)
            ids.append(send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                                      jobs=get_jobs()).id)
        return ids[0], ids[1]


def test_two_web_hosts_share_sessions_and_throttles_and_two_worker_hosts_survive_a_death_each(
        installation, owner_password_hash):
    install = installation
    web1, web2 = install.start_web("web1"), install.start_web("web2")  # they boot meanwhile
    alpha, beta = prepare(install, owner_password_hash)
    for host, url in (("web1", web1), ("web2", web2)):
        wait_until(lambda u=url: answers(u), timeout=60,
                   message=f"{host} did not answer /healthz:\n{install.log(host)}")

    # Signed in on web1 ...
    page = requests.get(web1 + "/login", **forwarded())
    cookie = page.cookies["session"]
    signed = requests.post(web1 + "/login", data={"email": OWNER_EMAIL, "password": OWNER_PASSWORD,
                                                  "csrf_token": csrf_token_from(page.text)},
                           **forwarded(cookie))
    assert signed.status_code == 302, signed.text
    cookie = signed.cookies.get("session", cookie)
    # ... the same cookie is a signed-in session on web2 (without it, web2 asks to sign in).
    assert requests.get(web2 + "/lists/", **forwarded(cookie)).status_code == 200
    assert requests.get(web2 + "/lists/", **forwarded()).status_code == 302
    # A form from web1's page is accepted by web2 (its CSRF token is the shared key's).
    form = requests.get(web1 + "/lists/", **forwarded(cookie))
    made = requests.post(web2 + "/lists/", data={"name": "Made on web2",
                                                 "csrf_token": csrf_token_from(form.text)},
                         **forwarded(cookie))
    assert made.status_code in (302, 303), made.text[:500]
    # Settings saved through web1 are what web2 shows at once (read from the database, no cache).
    settings = requests.get(web1 + "/settings/", **forwarded(cookie))
    saved = requests.post(web1 + "/settings/sender", data={
        "sender_name": "Shared Across Hosts", "sender_email": "news@alpha.example",
        "postal_address": "Acme Ltd, 1 Main Street", "time_zone": "UTC",
        "csrf_token": csrf_token_from(settings.text)}, **forwarded(cookie))
    assert saved.status_code in (302, 303), saved.text[:500]
    assert "Shared Across Hosts" in requests.get(web2 + "/settings/", **forwarded(cookie)).text
    with own_app(install.config()):  # the session's network is the client's, not the proxy's
        assert db.session.scalars(select(OwnerSession.network)).all() == ["203.0.113.0/24"]

    # A failed sign-in on each web host: one count, of the client's, seen by both.
    for url in (web1, web2):
        login = requests.get(url + "/login", **forwarded())
        wrong = requests.post(url + "/login", data={"email": OWNER_EMAIL, "password": "wrong",
                                                    "csrf_token": csrf_token_from(login.text)},
                              **forwarded(login.cookies["session"]))
        assert wrong.status_code == 401
    with install.redis_client() as redis:
        assert redis.get(f"{NAMESPACE}:throttle:login:client:{CLIENT}") == b"2"
        assert redis.get(f"{NAMESPACE}:throttle:login:client:{install.hosts.bridge_address}") is None

    # Signing out through web2 ends the session on web1 too.
    lists = requests.get(web2 + "/lists/", **forwarded(cookie))
    out = requests.post(web2 + "/logout", data={"csrf_token": csrf_token_from(lists.text)},
                        **forwarded(cookie))
    assert out.status_code == 302
    assert requests.get(web1 + "/lists/", **forwarded(cookie)).status_code == 302

    with own_app(install.config()):
        made_list = db.session.scalar(select(MailingList.id).where(MailingList.name == "Made on web2"))
        assert made_list is not None
        address = db.session.scalar(select(AuditEntry.address).where(
            AuditEntry.action == "list.create", AuditEntry.object_id == str(made_list)))
        assert address == CLIENT

        def sent(broadcast_id: int) -> tuple[int, str]:
            db.session.expire_all()
            row = db.session.get(Broadcast, broadcast_id)
            assert row is not None
            return row.sent_count, row.status

        def progressed(since: dict[int, int], by: int) -> bool:
            return all(sent(b)[0] >= since[b] + by for b in (alpha, beta))

        def mid_send() -> dict[int, int]:
            now = {b: sent(b) for b in (alpha, beta)}
            for broadcast_id, (count, status) in now.items():
                assert status == "sending" and count < RECIPIENTS, (
                    f"broadcast {broadcast_id} was not mid-send at the kill: {count} sent, {status}")
            return {b: count for b, (count, _) in now.items()}

        # worker1 alone first: it holds both identities' leases and sends both broadcasts.
        install.start_worker("worker1")
        wait_until(lambda: progressed({alpha: 0, beta: 0}, 5), timeout=90,
                   message=f"worker1 sent nothing:\n{install.log('worker1')}")
        install.start_worker("worker2")  # waits: both leases are worker1's
        install.hosts.kill_host("worker1")
        at_first_kill = mid_send()
        # worker2 takes both streams over once worker1's leases expire, and sends on.
        wait_until(lambda: progressed(at_first_kill, 5), timeout=90,
                   message=f"worker2 did not take over:\n{install.log('worker2')}")
        install.start_worker("worker1")
        install.hosts.kill_host("worker2")
        at_second_kill = mid_send()
        assert all(at_second_kill[b] > at_first_kill[b] for b in (alpha, beta))
        wait_until(lambda: all(sent(b)[1] == "sent" for b in (alpha, beta)), timeout=120,
                   message=f"the broadcasts did not finish:\n{install.log('worker1')}")

        # Nobody twice, per broadcast (each one's list has its own domain), and every row final.
        received = install.smtp.recipients()
        for broadcast_id, domain in ((alpha, "alpha.example"), (beta, "beta.example")):
            theirs = [r for r in received if r.endswith("@" + domain)]
            assert_nobody_twice(theirs)
            ledger = assert_ledger_consistent(broadcast_id, theirs)
            assert ledger.get("sent", 0) + ledger.get("unknown", 0) == RECIPIENTS, ledger
            assert set(ledger) <= {"sent", "unknown"}, ledger
            copies = Counter(theirs)
            assert len(copies) >= ledger["sent"] and max(copies.values()) == 1
