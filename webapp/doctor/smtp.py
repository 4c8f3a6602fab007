"""The default identity's transport: a real conversation with the SMTP server in SMTP_URL (or
a provider's API, or the outbox folder), nothing sent; the result is stored in Redis for the
send page and the System page."""

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
from urllib.parse import urlsplit

from flask import Flask
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from broadside.campaigns.broadcasts.service import sender_identity
from broadside.core.logs import url_passwords
from broadside.core.transport_urls import SMTP_SCHEMES, describe, scheme_of
from broadside.delivery.eml_folder import OutboxTransport
from broadside.delivery.identities import international
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.smtp import SmtpTransport
from broadside.delivery.transports import DeliveryError, network_words
from webapp.doctor.check import CHECK_TIMEOUT_S, Check
from webapp.extensions import db

SMTP_LAST_CHECK_KEY = "smtp:last_check"


@dataclass(frozen=True)
class SmtpCheck:
    ok: bool
    at: float  # epoch seconds
    target: str  # scheme://host:port, or "outbox"
    detail: str
    smtputf8: bool | None = None  # whether the server offered it (not stored with the result)

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
            return SmtpCheck(False, time.time(), target, f"the outbox folder {folder} is not writable "
                                                         f"({(exc.strerror or 'refused').lower()})")
        return SmtpCheck(True, time.time(), target, f"no SMTP_URL: messages are written to {folder}")
    if scheme_of(config["SMTP_URL"]) not in SMTP_SCHEMES:
        return _provider_check(config["SMTP_URL"], instance_path, target,
                               bool(config.get("PROVIDER_ENDPOINTS_ALLOW_PRIVATE")))
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
        offered = conn.has_extn("smtputf8")
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
        detail = f"connect: connection lost during the check: {network_words(exc, target)}"
        return SmtpCheck(False, time.time(), target, detail[:300])
    finally:
        try:
            conn.quit()
        except (smtplib.SMTPException, OSError):
            pass
        conn.close()
    login = ", login accepted" if transport.username is not None else ""
    return SmtpCheck(True, time.time(), target,
                     f"{target} answered ({greeting[0][:80]}){login}{sender_note}; nothing sent",
                     offered)


def _provider_check(url: str, instance_path: str, target: str, allow_private: bool) -> SmtpCheck:
    """SMTP_URL naming a provider's API: its own authenticated request that sends nothing."""
    secrets = url_passwords(url)

    def clean(text: str) -> str:
        for secret in sorted(secrets, key=len, reverse=True):
            if len(secret) >= 4:
                text = text.replace(secret, "•••")
        return text[:300]

    try:
        transport = make_transport(url, instance_path, timeout=CHECK_TIMEOUT_S,
                                   allow_private=allow_private)
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
            if result.smtputf8 is not None:  # broadside.delivery.identities.international
                international.record(app.extensions["broadside_redis"], app.config["BROADSIDE_NAMESPACE"],
                             app.config["SECRET_KEY"], app.config["SMTP_URL"], result.smtputf8)
        except RedisError:
            pass  # the check itself is what matters; the Redis check reports the outage
    return smtp_check_as_check(result)
