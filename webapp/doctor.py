"""`flask --app webapp doctor` and the System page: is this installation able to send?

Each check answers in one line, with what to do when it fails. The checks take the app (its
config, its Redis client, its migrations) and never a request, so the CLI and the page share
them. They are quick: every network step has a timeout of a few seconds, and nothing is sent.
"""

from __future__ import annotations

import json
import os
import smtplib
import socket
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parseaddr
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from flask import Flask
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from broadside.campaigns.broadcasts.service import sender_identity
from broadside.core.config import ENV_VARS
from broadside.core.logs import mask_query_passwords, url_passwords
from broadside.core.redis_health import how_to_start, shown_url
from broadside.core.timeutil import epoch_to_stored, local_format
from broadside.core.transport_urls import SMTP_SCHEMES, describe, scheme_of
from broadside.delivery.eml_folder import OutboxTransport
from broadside.delivery.identities.service import SendingIdentity
from broadside.delivery.lease import HEARTBEAT_KEY, LEASE_KEY, SINCE_KEY, stream_key
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.smtp import SmtpTransport
from broadside.delivery.transports import DeliveryError
from webapp.extensions import db
from webapp.identities import checks as identity_checks
from webapp.templating import SYSTEM_TIME, owner_zone

CHECK_TIMEOUT_S = 4.0
SMTP_LAST_CHECK_KEY = "smtp:last_check"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
SECRET_VARS = ("SECRET_KEY", "WEBHOOK_SECRET", "METRICS_TOKEN")
URL_VARS = ("SMTP_URL", "DATABASE_URL", "REDIS_URL")
UTC_ZONE = ZoneInfo("UTC")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: not known yet (the page's SMTP line before any check)
    summary: str
    advice: str = ""  # what to do, when it failed
    details: tuple[str, ...] = ()  # extra lines (the configuration values)

    def line(self) -> str:
        mark = {True: "✓", False: "✗", None: "?"}[self.ok]
        text = f"{mark} {self.name}: {self.summary}"
        return f"{text} → {self.advice}" if self.advice and not self.ok else text


# ---------------------------------------------------------------- configuration


def mask_url(value: str) -> str:
    """The URL with its passwords replaced by ****: `user:password@` and `?password=`."""
    if not value:
        return value
    parts = urlsplit(value)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:****@{host}")
    return urlunsplit(parts._replace(query=mask_query_passwords(parts.query)))


def shown_value(name: str, value: Any) -> str:
    """A configuration value as it may be printed: secrets never appear."""
    if name in SECRET_VARS:
        return f"set ({len(str(value))} characters, hidden)" if value else "unset"
    if name in URL_VARS:
        if not value:
            return "unset (messages go to the outbox folder)" if name == "SMTP_URL" else "unset"
        return mask_url(str(value))
    if value in ("", None):
        return "unset"
    return str(value)


def check_configuration(config: Mapping[str, Any]) -> Check:
    # Reaching this point means create_app parsed and validated every variable (a bad value
    # stops start-up with one line naming it); here we show what was understood.
    details = tuple(f"{name} = {shown_value(name, config.get(name))}" for name in ENV_VARS)
    return Check("configuration", True, f"{len(ENV_VARS)} variables parsed", details=details)


def check_base_url(base_url: str) -> Check:
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        return Check("BASE_URL", False, f"{base_url!r} is not a web address",
                     "set BASE_URL to the address people open, e.g. https://news.example.com")
    if parts.query or parts.fragment:
        return Check("BASE_URL", False, f"{base_url} has a query or fragment",
                     "set BASE_URL to the site's root address, without ?… or #…")
    if parts.scheme != "https" and host not in LOCAL_HOSTS:
        return Check("BASE_URL", False, f"{base_url} is not https",
                     "mail clients need an https one-click unsubscribe URL: serve Broadside "
                     "over TLS and set BASE_URL=https://…")
    note = " (local only: links in emails work on this machine alone)" if host in LOCAL_HOSTS else ""
    return Check("BASE_URL", True, f"{base_url}{note}")


# ---------------------------------------------------------------- database and Redis


def _schema_head(app: Flask) -> str | None:
    """The code's newest migration, read once per process: the migrations folder cannot change
    under a running app, and reading it (Alembic loads every revision file) cost the System
    page most of its time."""
    cached = app.extensions.get("broadside_schema_head")
    if cached is not None:
        return cached[0]
    migrate = app.extensions["migrate"]
    config = migrate.migrate.get_config(migrate.directory)
    head = ScriptDirectory.from_config(config).get_current_head()
    app.extensions["broadside_schema_head"] = (head,)
    return head


def _check_engine(app: Flask, url: URL) -> Engine:
    """The checks' own engine: a short connect timeout without touching the app's pool. One
    per app, keeping one connection: the System page and its checks poll this, and a new
    PostgreSQL connection per view cost more than the rest of the page."""
    engine = app.extensions.get("doctor_engine")
    if engine is not None and engine.url != url:
        engine.dispose()
        engine = None
    if engine is None:
        connect_args = {"timeout": CHECK_TIMEOUT_S} if url.get_backend_name() == "sqlite" else {
            "connect_timeout": int(CHECK_TIMEOUT_S)}
        engine = create_engine(url, pool_size=1, max_overflow=1, pool_pre_ping=False,
                               connect_args=connect_args)
        app.extensions["doctor_engine"] = engine
    return engine


def check_database(app: Flask) -> Check:
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    backend = url.get_backend_name()
    if backend == "sqlite" and url.database and url.database != ":memory:":
        if not Path(url.database).exists():
            return Check("database", False, f"the SQLite file {url.database} does not exist",
                         "run `flask --app webapp db upgrade` (the Procfile's web process does it)")
    engine = _check_engine(app, url)
    try:
        with engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as exc:
        engine.dispose()  # the next check connects afresh
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
        return Check("database", False, f"{backend} unreachable: {reason}",
                     "check DATABASE_URL and that the database server is running")
    head = _schema_head(app)
    if current == head:
        return Check("database", True, f"{backend} reachable, schema current ({head})")
    if current is None:
        return Check("database", False, f"{backend} reachable but empty (no migrations applied)",
                     "run `flask --app webapp db upgrade`")
    migrate = app.extensions["migrate"]
    script = ScriptDirectory.from_config(migrate.migrate.get_config(migrate.directory))
    try:
        script.get_revision(current)
    except CommandError:
        return Check("database", False, f"schema at {current}, which this code does not know",
                     "the database is newer than this code: deploy the matching version")
    return Check("database", False, f"schema at {current}, code needs {head}",
                 "run `flask --app webapp db upgrade`")


def check_redis(redis: Redis, url: str) -> Check:
    try:
        started = time.monotonic()
        redis.ping()
        elapsed_ms = (time.monotonic() - started) * 1000
    except RedisError as exc:
        # The same words as the worker's log and the dashboard (broadside.core.redis_health).
        return Check("Redis", False, f"not answering at {shown_url(url)} ({exc})",
                     f"{how_to_start(url)}; it holds the queue and the worker's lease, so nothing "
                     "is sent without it")
    return Check("Redis", True, f"reachable ({elapsed_ms:.1f} ms)")


# ---------------------------------------------------------------- the worker


@dataclass(frozen=True)
class WorkerInfo:
    holder: str | None
    since: float | None  # epoch seconds
    heartbeat: float | None  # epoch seconds

    def heartbeat_age(self, now: float | None = None) -> float | None:
        if self.heartbeat is None:
            return None
        return max(0.0, (now or time.time()) - self.heartbeat)


def _epoch(raw: bytes | None) -> float | None:
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def worker_info(redis: Redis, namespace: str, stream: str = "default") -> WorkerInfo:
    """Who holds a stream's sending lease (broadside.delivery.lease; the default identity's unless
    another stream is named), since when, and its last renewal."""
    holder, since, heartbeat = redis.mget(
        stream_key(namespace, LEASE_KEY, stream), stream_key(namespace, SINCE_KEY, stream),
        stream_key(namespace, HEARTBEAT_KEY, stream),
    )
    if not holder:
        return WorkerInfo(None, None, _epoch(heartbeat))
    return WorkerInfo(holder.decode(errors="replace"), _epoch(since), _epoch(heartbeat))


def format_clock(epoch: float, zone: ZoneInfo) -> str:
    """In the owner's zone, named as on every page (the System page shows these lines)."""
    return local_format(epoch_to_stored(epoch), zone, SYSTEM_TIME)


def check_worker(redis: Redis, namespace: str, zone: ZoneInfo = UTC_ZONE) -> Check:
    try:
        info = worker_info(redis, namespace)
    except RedisError:
        return Check("worker", False, "unknown while Redis is not answering", "start Redis first (see above)")
    if info.holder is None:
        last = ""
        if info.heartbeat is not None:
            last = f" (last heartbeat {format_clock(info.heartbeat, zone)})"
        return Check("worker", False, f"no worker holds the sending lease{last}",
                     "start it: `python -m jobs`, or `honcho start` for web and worker")
    age = info.heartbeat_age()
    since = f" since {format_clock(info.since, zone)}" if info.since else ""
    beat = f", heartbeat {age:.1f} s ago" if age is not None else ""
    return Check("worker", True, f"{info.holder} holds the lease{since}{beat}")


# ---------------------------------------------------------------- SMTP or the outbox


@dataclass(frozen=True)
class SmtpCheck:
    ok: bool
    at: float  # epoch seconds
    target: str  # scheme://host:port, or "outbox"
    detail: str

    def as_json(self) -> str:
        return json.dumps({"ok": self.ok, "at": self.at, "target": self.target, "detail": self.detail})


def smtp_target(config: Mapping[str, Any]) -> str:
    url = config.get("SMTP_URL") or ""
    if not url:
        return "outbox"
    if scheme_of(url) not in SMTP_SCHEMES:
        return describe(url)  # a provider's API (its key masked)
    parts = urlsplit(url)
    default_port = {"smtp": 25, "smtp+starttls": 587, "smtps": 465}.get(parts.scheme, 25)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or default_port}"


_ADVICE = {
    "connect": "check the host and port in SMTP_URL and that the mail server is up and reachable",
    "tls": "check the scheme in SMTP_URL: smtp+starttls:// (usually port 587) or smtps:// (465)",
    "auth": "check the user name and password in SMTP_URL (a provider may need an app password)",
    "mail": "530 means the server wants a login: put user:password in SMTP_URL; 550/553 means it "
            "refuses the sender: use an address your provider lets you send from (Settings or MAIL_FROM)",
}


def run_smtp_check(config: Mapping[str, Any], instance_path: str, mail_from: str | None = None) -> SmtpCheck:
    """Connect, EHLO, STARTTLS/TLS and AUTH as configured, and send nothing; or, with no
    SMTP_URL, prove the outbox folder is writable."""
    target = smtp_target(config)
    if target == "outbox":
        folder = OutboxTransport(Path(instance_path) / "outbox").folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=folder, suffix=".probe")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            return SmtpCheck(False, time.time(), target, f"the outbox folder {folder} is not writable: {exc}")
        return SmtpCheck(True, time.time(), target, f"no SMTP_URL: messages are written to {folder}")
    if scheme_of(config["SMTP_URL"]) not in SMTP_SCHEMES:
        return _provider_check(config["SMTP_URL"], instance_path, target)
    transport = SmtpTransport(
        config["SMTP_URL"], timeout=CHECK_TIMEOUT_S, local_hostname=socket.getfqdn() or None
    )
    try:
        # What SmtpTransport.check() does (connect, EHLO, STARTTLS/TLS, AUTH), on a connection
        # we keep for one more step: MAIL FROM then RSET. No recipient, no DATA: nothing is
        # sent, but a server that wants a login we lack, or refuses our sender, says so now
        # instead of pausing the first broadcast.
        conn = transport._connect()
    except DeliveryError as exc:
        summary = f"{exc.code} {exc.reply}".strip() if exc.code else exc.reply
        return SmtpCheck(False, time.time(), target, f"{exc.phase}: {summary}"[:300])
    try:
        greeting = (conn.ehlo_resp or b"").decode(errors="replace").splitlines()[:1] or [target]
        sender_note = ""
        if mail_from:
            code, reply = conn.mail(mail_from)
            if code != 250:
                text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
                detail = f"mail: {code} {text} (sender {mail_from})"
                return SmtpCheck(False, time.time(), target, detail[:300])
            conn.rset()
            sender_note = f", sender {mail_from} accepted"
    except (smtplib.SMTPException, OSError) as exc:
        detail = f"connect: connection lost during the check: {exc}"
        return SmtpCheck(False, time.time(), target, detail[:300])
    finally:
        try:
            conn.quit()
        except (smtplib.SMTPException, OSError):
            pass
        conn.close()
    login = ", login accepted" if transport.username is not None else ""
    return SmtpCheck(True, time.time(), target,
                     f"{target} answered ({greeting[0][:80]}){login}{sender_note}; nothing sent")


def _provider_check(url: str, instance_path: str, target: str) -> SmtpCheck:
    """SMTP_URL naming a provider's API: its own authenticated request that sends nothing."""
    secrets = url_passwords(url)

    def clean(text: str) -> str:
        for secret in sorted(secrets, key=len, reverse=True):
            if len(secret) >= 4:
                text = text.replace(secret, "•••")
        return text[:300]

    try:
        transport = make_transport(url, instance_path, timeout=CHECK_TIMEOUT_S)
        try:
            said = transport.check()
        finally:
            transport.close()
    except DeliveryError as exc:
        summary = f"{exc.code} {exc.reply}".strip() if exc.code else exc.reply
        return SmtpCheck(False, time.time(), target, clean(f"{exc.phase}: {summary}"))
    return SmtpCheck(True, time.time(), target, clean(f"{target} answered: {said}; nothing sent"))


def smtp_key(namespace: str) -> str:
    return f"{namespace}:{SMTP_LAST_CHECK_KEY}"


def store_smtp_check(redis: Redis, namespace: str, result: SmtpCheck) -> None:
    """Kept for the send page: it warns when the last check failed."""
    redis.set(smtp_key(namespace), result.as_json())


def last_smtp_check(redis: Redis, namespace: str, config: Mapping[str, Any]) -> SmtpCheck | None:
    """The last stored check, if it was made against the SMTP server configured now."""
    raw = redis.get(smtp_key(namespace))
    if not raw:
        return None
    try:
        data = json.loads(raw)
        result = SmtpCheck(bool(data["ok"]), float(data["at"]), str(data["target"]), str(data["detail"]))
    except (ValueError, KeyError, TypeError):
        return None
    return result if result.target == smtp_target(config) else None


def smtp_check_as_check(result: SmtpCheck) -> Check:
    name = ("outbox" if result.target == "outbox"
            else "SMTP" if result.target.startswith("smtp") else "default identity")
    if result.ok:
        return Check(name, True, result.detail)
    phase = result.detail.split(":", 1)[0]
    advice = _ADVICE.get(phase, "check SMTP_URL and the provider's account")
    if result.target == "outbox":
        advice = "make the instance folder writable by the user running Broadside"
    return Check(name, False, result.detail, advice)


def sender_address(app: Flask, *, ask_database: bool = True) -> str | None:
    """The envelope sender broadcasts use: Settings' sender address, else MAIL_FROM."""

    if ask_database:
        try:
            with app.app_context():
                return sender_identity(db.session, app.config["MAIL_FROM"])[1]
        except SQLAlchemyError:
            pass
    return parseaddr(app.config["MAIL_FROM"])[1] or None


def check_smtp(app: Flask, *, store: bool = True, database_ok: bool = True) -> Check:
    """`database_ok=False` (the database check failed) reads the sender from MAIL_FROM only,
    so an unreachable database cannot stall this check."""
    mail_from = sender_address(app, ask_database=database_ok) if app.config.get("SMTP_URL") else None
    result = run_smtp_check(app.config, app.instance_path, mail_from)
    if store:
        try:
            store_smtp_check(app.extensions["broadside_redis"], app.config["BROADSIDE_NAMESPACE"], result)
        except RedisError:
            pass  # the check itself is what matters; the Redis check reports the outage
    return smtp_check_as_check(result)


# ---------------------------------------------------------------- the other identities


def check_identity(app: Flask, identity: SendingIdentity, *, store: bool = True) -> Check:
    """An identity's transport (the SMTP check above is the default's): a real conversation,
    nothing sent, stored for the System page."""
    return identity_check_as_check(identity, identity_checks.run(app, identity, store=store))


def identity_check_as_check(identity: SendingIdentity, result: identity_checks.TransportCheck) -> Check:
    return Check(f"identity {identity.name}", result.ok, result.detail,
                 "" if result.ok else identity_checks.advice(identity, result))


# ---------------------------------------------------------------- all of them


def run_checks(app: Flask, *, smtp: bool = True) -> list[Check]:
    """Every check, in the order a self-hoster fixes things. `smtp=False` skips the network
    conversations with the mail server and each identity's transport (the page shows the last
    stored results instead)."""
    redis = app.extensions["broadside_redis"]
    namespace = app.config["BROADSIDE_NAMESPACE"]
    checks = [check_configuration(app.config), check_database(app)]
    # Times in the owner's zone (Settings), read only once the database answered quickly: a
    # database that does not answer must not stall the checks.
    zone = owner_zone() if checks[1].ok else UTC_ZONE
    checks += [check_redis(redis, app.config["REDIS_URL"]), check_worker(redis, namespace, zone)]
    if smtp:
        checks.append(check_smtp(app, database_ok=bool(checks[1].ok)))
        if checks[1].ok:
            checks.extend(check_identity(app, i) for i in identity_checks.identity_rows(app))
    checks.append(check_base_url(app.config["BASE_URL"]))
    return checks


def report(app: Flask, echo=print) -> int:
    """Print one line per check (and the configuration values); 0 only when all pass."""
    checks = run_checks(app)
    for check in checks:
        echo(check.line())
        for detail in check.details:
            echo(f"    {detail}")
    failed = [c.name for c in checks if c.ok is not True]
    echo(f"{len(checks) - len(failed)} of {len(checks)} checks passed"
         + (f"; fix: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
