"""POSTing due webhook events: one small batch per call, never long enough to hold mail back.

The worker's job (`jobs/webhooks_out.py`, on the lowest-priority queue) calls `deliver_due`:
claim up to `batch` due rows (committed before any request: `ledger.claim`), then for each,
while the call's `budget` lasts: resolve and check the endpoint's host again (DNS can change
since the endpoint was saved: `addresses.resolve`), connect to that very address (the Host
header and TLS name stay the URL's), POST the signed JSON with a timeout of a few seconds,
and record the outcome (`ledger.delivered` or `ledger.failed_attempt`, committed per row).
Rows left when the budget is spent go back to pending uncounted.

A 2xx answer is delivered. Anything else (a redirect included: following one could lead to a
private address) is a failed attempt, retried with backoff until a day after the event.

The body: `{"id": "evt_…", "type": "…", "created_at": "…Z", "data": {…}}`, compact JSON with
sorted keys, the same bytes on every attempt; the signature covers the attempt's timestamp
and these bytes (`signing.py`).
"""

from __future__ import annotations

import http.client
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError

from broadside.core.connection_words import connection_words
from broadside.core.errors import ValidationError
from broadside.core.models import WebhookEndpoint, WebhookMessage
from broadside.core.timeutil import utcnow
from broadside.webhooks import ledger
from broadside.webhooks.addresses import Target, resolve
from broadside.webhooks.signing import HEADER, header_value

log = logging.getLogger("broadside.webhooks")

DAY = timedelta(days=1)
USER_AGENT = "Broadside-Webhooks/1"
MAX_REPLY = 200


@dataclass(frozen=True)
class Settings:
    allow_private: bool = False
    window: timedelta = DAY  # retry for this long after the event; disable after this long failing
    base_seconds: float = 30.0  # the first retry's delay
    timeout: float = 5.0  # per POST (connect at most 3 s of it)
    batch: int = 10
    budget: float = 4.0  # seconds of POSTing per call


@dataclass
class Outcome:
    delivered: int = 0
    failed: int = 0
    released: int = 0
    statuses: list[str] = field(default_factory=list)


def body_of(message: WebhookMessage) -> bytes:
    document = {"id": message.event_id, "type": message.event_type,
                "created_at": message.created_at.isoformat(timespec="seconds") + "Z",
                "data": message.data}
    return json.dumps(document, separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False).encode()


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """One POST to the checked address; raises OSError/HTTPError when no answer came."""
    default_port = 443 if target.scheme == "https" else 80
    host_header = target.host if target.port == default_port else f"{target.host}:{target.port}"
    if ":" in target.host and target.port == default_port:
        host_header = f"[{target.host}]"
    elif ":" in target.host:
        host_header = f"[{target.host}]:{target.port}"
    conn = _connect(target, min(timeout, 3.0))
    try:
        conn.timeout = timeout
        conn.request("POST", target.path, body=body,
                     headers={**headers, "Host": host_header, "Connection": "close"})
        response = conn.getresponse()
        return response.status, response.data[:2000]
    finally:
        conn.close()


def _connect(target: Target, timeout: float) -> HTTPConnection:
    """A connection to the first of the checked addresses that answers (never to a name
    resolved again: the address that was checked is the one called). TLS verifies the URL's
    host name, not the address."""
    failure: Exception | None = None
    for address in target.addresses:
        conn: HTTPConnection
        if target.scheme == "https":
            conn = HTTPSConnection(address, target.port, timeout=timeout,
                                   server_hostname=target.host, assert_hostname=target.host)
        else:
            conn = HTTPConnection(address, target.port, timeout=timeout)
        try:
            conn.connect()
            return conn
        except (HTTPError, OSError) as exc:
            conn.close()
            failure = exc
    assert failure is not None  # resolve() never returns no address
    raise failure


def attempt(message: WebhookMessage, url: str, secret: str, settings: Settings,
            now_unix: int) -> tuple[int | None, str]:
    """POST one event; returns (status code or None, error or "")."""
    try:
        target = resolve(url, allow_private=settings.allow_private)
    except ValidationError as exc:
        return None, exc.message
    body = body_of(message)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Broadside-Event-Id": message.event_id,
        "Broadside-Event-Type": message.event_type,
        HEADER: header_value(secret, now_unix, body),
    }
    try:
        code, reply = post(target, body, headers, settings.timeout)
    except (HTTPError, OSError, http.client.HTTPException) as exc:
        return None, f"No answer from {target.host}: {connection_words(exc, target.host, log)}"[:300]
    if 200 <= code < 300:
        return code, ""
    text = " ".join(reply.decode("utf-8", "replace").split())[:MAX_REPLY]
    return code, f"HTTP {code}" + (f": {text}" if text else "")


def deliver_due(session: Session, settings: Settings, now: datetime | None = None) -> Outcome:
    """Claim one batch of due events and POST them while the budget lasts. `now` (for tests
    of the retry window) replaces the clock for the ledger's decisions, not the signature's
    timestamp, which is always the real time of the request."""
    fixed_now = now
    outcome = Outcome()
    claimed = ledger.claim(session, fixed_now or utcnow(), settings.batch)
    session.commit()  # claim before the POST
    started = time.monotonic()
    for index, message_id in enumerate(claimed):
        if time.monotonic() - started > settings.budget:
            outcome.released = ledger.release(session, claimed[index:], fixed_now or utcnow())
            session.commit()
            break
        row = session.execute(
            select(WebhookMessage, WebhookEndpoint.url, WebhookEndpoint.secret)
            .join(WebhookEndpoint, WebhookEndpoint.id == WebhookMessage.endpoint_id)
            .where(WebhookMessage.id == message_id)).one_or_none()
        if row is None:
            continue  # the endpoint was deleted meanwhile
        message, url, secret = row
        code, error = attempt(message, url, secret, settings, int(time.time()))
        when = fixed_now or utcnow()
        if not error and code is not None:
            if ledger.delivered(session, message_id, message.endpoint_id, code, when):
                outcome.delivered += 1
        else:
            status = ledger.failed_attempt(
                session, message_id, message.endpoint_id, code=code, error=error, now=when,
                window=settings.window, base_seconds=settings.base_seconds)
            outcome.failed += 1
            outcome.statuses.append(status)
        session.commit()
    return outcome
