"""The connection check of a sending identity's transport other than the default (whose check is
`smtp.py`): `doctor` runs one per identity, the identities page's "Check connection" runs one,
and the System page shows the last result.

`run` builds the identity's transport (broadside.delivery.providers.factory.make_transport, a timeout
of a few seconds) and calls its `check()`: SMTP connects, greets and logs in, a provider's API
is asked something that proves the key, the outbox proves its folder; nothing is sent (SES's
`GetAccount` also tells the account's MaxSendRate, kept for its account ceiling). An identity
with a bounce mailbox also logs in to it and selects its folder (`mailbox_check`), and says so.
The
result is stored in Redis, so the System page (polled every few seconds) shows it without a
new conversation each time; a result made against another transport URL than the identity's
current one is ignored (compared by a keyed fingerprint: the URL holds secrets, so neither it
nor a plain hash of it is stored). Messages never carry the URL's secrets.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass

from flask import Flask
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from broadside.core import mailbox_urls
from broadside.core.transport_urls import secrets_in_url
from broadside.delivery import account_limit
from broadside.delivery.identities import international
from broadside.delivery.identities.service import SendingIdentity, all_identities
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.providers.http import ProviderTransport
from broadside.delivery.smtp import SmtpTransport
from broadside.delivery.transports import DeliveryError
from broadside.feedback.mailbox.imap import MailboxError, check_login
from webapp.doctor.check import CHECK_TIMEOUT_S, Check
from webapp.extensions import db

KEY = "identity_check"
MAX_DETAIL = 300

log = logging.getLogger("broadside.doctor")

# What to do when a check failed, by the phase it failed in (DeliveryError.phase).
ADVICE = {
    "connect": "check the host and port in its transport URL and that the server is reachable",
    "tls": "check the scheme of its transport URL: smtp+starttls:// (usually port 587) or smtps:// (465)",
    "auth": "check the user name and password in its transport URL",
    "request": "the provider could not be reached: check the network, and ?endpoint= if set",
    "response": "the provider gave no answer in time: try again; if it persists, check ?endpoint=",
    "api": "the provider refused: check the key in its transport URL and the account's state",
    "mailbox": "check its bounce mailbox URL: the IMAP server, login, password and folder",
}


@dataclass(frozen=True)
class TransportCheck:
    ok: bool
    at: float  # epoch seconds
    target: str  # the transport URL, masked
    detail: str
    phase: str = ""  # DeliveryError.phase when it failed (for the advice)
    fingerprint: str = ""

    def as_json(self) -> str:
        return json.dumps({"ok": self.ok, "at": self.at, "target": self.target,
                           "detail": self.detail, "phase": self.phase,
                           "fingerprint": self.fingerprint})


def _fingerprint(secret_key: str, url: str) -> str:
    return hmac.new(secret_key.encode(), url.encode(), hashlib.sha256).hexdigest()[:24]


def _without_secrets(text: str, url: str) -> str:
    """The text with the URL's secrets masked (a provider's error message, or a library's,
    might quote what it was given): the password, the user name (a provider's key, or an SMTP
    login that may be a token) and the endpoint's credentials (`transport_urls.secrets_in_url`)."""
    for secret in sorted(secrets_in_url(url), key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "•••")
    return text


def run(app: Flask, identity: SendingIdentity, *, store: bool = True) -> TransportCheck:
    """Connect and authenticate as the identity's transport would, send nothing."""
    url = identity.transport_url
    target = identity.transport
    phase = ""
    try:
        transport = make_transport(url, app.instance_path, timeout=CHECK_TIMEOUT_S, allow_private=bool(
            app.config.get("PROVIDER_ENDPOINTS_ALLOW_PRIVATE")))
        try:
            detail = f"{target} answered: {transport.check()}; nothing sent"
            ok = True
            if isinstance(transport, ProviderTransport) and transport.max_send_rate:
                _keep_ses_rate(app, url, transport.max_send_rate)
            if isinstance(transport, SmtpTransport) and transport.offered_smtputf8 is not None:
                _keep_smtputf8(app, url, transport.offered_smtputf8)
        finally:
            try:
                transport.close()  # every Transport closes (the protocol says so)
            except Exception:  # closing a checked connection is best effort
                pass
    except DeliveryError as exc:
        ok, phase = False, exc.phase
        said = f"{exc.code} {exc.reply}".strip() if exc.code else exc.reply
        detail = f"{exc.phase}: {said}"
    except Exception as exc:  # a check reports whatever stopped it; it never raises
        log.warning("transport check of identity %s failed unexpectedly", identity.name,
                    exc_info=exc)
        ok, detail = False, "the check stopped on an unexpected error (its details are in the log)"
    if identity.bounce_mailbox_url:
        mailbox_ok, said = mailbox_check(identity)
        detail = f"{detail}; bounce mailbox: {said}"
        if ok and not mailbox_ok:
            ok, phase = False, "mailbox"
    result = TransportCheck(ok, time.time(), target,
                            _without_secrets(detail, url)[:MAX_DETAIL + 200], phase,
                            _fingerprint(app.config["SECRET_KEY"], url + identity.bounce_mailbox_url))
    if store:
        try:
            redis: Redis = app.extensions["broadside_redis"]
            redis.set(key(app.config["BROADSIDE_NAMESPACE"], identity), result.as_json())
        except RedisError:
            pass  # the check itself is what matters; the Redis check reports the outage
    return result


def mailbox_check(identity: SendingIdentity) -> tuple[bool, str]:
    """Log in to the identity's bounce mailbox and select its folder (nothing read or moved):
    whether it worked, and what was found or what went wrong, in the owner's words."""
    try:
        return True, check_login(mailbox_urls.parse(identity.bounce_mailbox_url), CHECK_TIMEOUT_S)
    except (MailboxError, mailbox_urls.MailboxUrlError) as exc:
        return False, str(exc)


def check_default_mailbox(app: Flask) -> Check:
    """The default identity's bounce mailbox (BOUNCE_MAILBOX_URL): logged in to, nothing read."""
    url = str(app.config.get("BOUNCE_MAILBOX_URL") or "")
    ok, said = mailbox_check(SendingIdentity(
        id=None, name="default", from_name="", from_email="", transport_url="", delay_ms=0,
        hourly_limit=0, postal_address="", status="active", pause_reason=None,
        bounce_mailbox_url=url))
    return Check("bounce mailbox", ok, f"{mailbox_urls.describe(url)}: {said}",
                 "" if ok else "check BOUNCE_MAILBOX_URL: the IMAP server, login, password and folder")


def _keep_ses_rate(app: Flask, url: str, max_send_rate: float) -> None:
    """SES's MaxSendRate, kept under the account's HMAC: its streams keep under 90 % of it
    (broadside.delivery.account_limit)."""
    digest = account_limit.account_digest(url, app.config["SECRET_KEY"])
    if digest is None:
        return
    try:
        account_limit.record_ses_max_rate(app.extensions["broadside_redis"],
                                          app.config["BROADSIDE_NAMESPACE"], digest, max_send_rate)
    except RedisError:
        pass  # read again by the worker every hour


def _keep_smtputf8(app: Flask, url: str, offered: bool) -> None:
    """Whether its server offered SMTPUTF8 (broadside.delivery.identities.international)."""
    try:
        international.record(app.extensions["broadside_redis"], app.config["BROADSIDE_NAMESPACE"],
                     app.config["SECRET_KEY"], url, offered)
    except RedisError:
        pass  # said as "not checked yet"


def advice(identity: SendingIdentity, result: TransportCheck) -> str:
    what = ADVICE.get(result.phase, "check its transport URL")
    return f"{what} (Settings → Sending identities → {identity.name} → Edit)"


def identity_rows(app: Flask) -> list[SendingIdentity]:
    """The live identities other than the default ([] when the database cannot say)."""
    try:
        with app.app_context():
            return all_identities(db.session, app.config)[1:]
    except SQLAlchemyError:
        return []


def key(namespace: str, identity: SendingIdentity) -> str:
    return f"{namespace}:{KEY}:{identity.id}"


def last(app: Flask, identity: SendingIdentity) -> TransportCheck | None:
    """The last stored check of this identity, if it was made against its current transport
    URL (raises RedisError when Redis is unreachable)."""
    raw = app.extensions["broadside_redis"].get(key(app.config["BROADSIDE_NAMESPACE"], identity))
    if not raw:
        return None
    try:
        data = json.loads(raw)
        result = TransportCheck(bool(data["ok"]), float(data["at"]), str(data["target"]),
                                str(data["detail"]), str(data.get("phase") or ""),
                                str(data["fingerprint"]))
    except (ValueError, KeyError, TypeError):
        return None
    current = _fingerprint(app.config["SECRET_KEY"],
                           identity.transport_url + identity.bounce_mailbox_url)
    return result if hmac.compare_digest(result.fingerprint, current) else None


def check_identity(app: Flask, identity: SendingIdentity, *, store: bool = True) -> Check:
    """An identity's transport (the SMTP check above is the default's): a real conversation,
    nothing sent, stored for the System page."""
    return identity_check_as_check(identity, run(app, identity, store=store))


def identity_check_as_check(identity: SendingIdentity, result: TransportCheck) -> Check:
    return Check(f"identity {identity.name}", result.ok, result.detail,
                 "" if result.ok else advice(identity, result))
