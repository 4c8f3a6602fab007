"""POSTing due webhook events: one small batch of one endpoint's events per call.

The worker's webhook runner (`jobs/webhooks_out.py`: threads of their own, never a mail
stream's) calls `deliver_due` for one endpoint at a time: claim up to `batch` of its due rows
in the ledger's order (committed before any request: `ledger.claim`), then for each, while
the call's `budget` lasts and no stop is asked: resolve and check the endpoint's host again
(DNS can change since the endpoint was saved: `addresses.resolve`), POST the signed JSON to
that very address within the deadline (`exchange.post`: connect, request and the whole answer
within `timeout` seconds, at most 4 KB of the answer read and never decompressed), and record
the outcome (`ledger.delivered` or `ledger.failed_attempt`, committed per row). Rows left
when the budget is spent or a stop is asked go back to pending uncounted.

A 2xx answer is delivered. Anything else (a redirect included: following one could lead to a
private address), no answer, or no whole answer within the deadline is a failed attempt,
retried with backoff until a day after the event; an endpoint failing for a whole day is
disabled (`ledger`).

The body: `{"id": "evt_…", "type": "…", "created_at": "…Z", "data": {…}}`, compact JSON with
sorted keys, the same bytes on every attempt; the signature covers the attempt's timestamp
and these bytes (`signing.py`).
"""

from __future__ import annotations

import http.client
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.connection_words import connection_words
from broadside.core.errors import ValidationError
from broadside.core.models import WebhookEndpoint, WebhookMessage
from broadside.core.timeutil import utcnow
from broadside.webhooks import ledger
from broadside.webhooks.addresses import resolve
from broadside.webhooks.exchange import Overtime, post
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
    timeout: float = 10.0  # per POST, all of it: connect, TLS, request, the whole answer
    batch: int = 10
    budget: float = 30.0  # seconds of POSTing per call (then the endpoint's turn ends)


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
        answer = post(target, body, headers, settings.timeout)
    except Overtime:
        return None, (f"No whole answer from {target.host} within {settings.timeout:g} seconds: "
                      "a receiver must answer within that time (answer first, then do the "
                      "work).")[:300]
    except (OSError, http.client.HTTPException) as exc:
        if isinstance(exc, http.client.HTTPException) and not isinstance(
                exc, (ConnectionError, http.client.IncompleteRead)):
            log.info("not an HTTP answer from %s: %r", target.host, exc)
            return None, f"No HTTP answer from {target.host}: what came back is not one."
        return None, f"No answer from {target.host}: {connection_words(exc, target.host, log)}"[:300]
    code = answer.status
    if 200 <= code < 300:
        return code, ""
    if answer.compressed:
        return code, f"HTTP {code} (a compressed answer, not read)"
    text = " ".join(answer.body.decode("utf-8", "replace").split())[:MAX_REPLY]
    return code, f"HTTP {code}" + (f": {text}" if text else "")


def deliver_due(session: Session, settings: Settings, now: datetime | None = None, *,
                endpoint_id: int | None = None, stop: Callable[[], bool] | None = None) -> Outcome:
    """Claim one batch of due events (of one endpoint, or of any) and POST them in order while
    the budget lasts and no stop is asked; the rows not reached go back uncounted. `now` (for
    tests of the retry window) replaces the clock for the ledger's decisions, not the
    signature's timestamp, which is always the real time of the request."""
    fixed_now = now
    outcome = Outcome()
    claimed = ledger.claim(session, fixed_now or utcnow(), settings.batch, endpoint_id=endpoint_id)
    session.commit()  # claim before the POST
    started = time.monotonic()
    done = 0
    try:
        for message_id in claimed:
            if time.monotonic() - started > settings.budget or (stop is not None and stop()):
                break
            _deliver_one(session, message_id, settings, fixed_now, outcome)
            done += 1
    finally:
        # A stop, the budget spent, or an error (the database gone): the rest go back uncounted.
        left = claimed[done:]
        if left:
            session.rollback()
            outcome.released = ledger.release(session, left, fixed_now or utcnow())
            session.commit()
    return outcome


def _deliver_one(session: Session, message_id: int, settings: Settings, fixed_now: datetime | None,
                 outcome: Outcome) -> None:
    row = session.execute(
        select(WebhookMessage, WebhookEndpoint.url, WebhookEndpoint.secret)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookMessage.endpoint_id)
        .where(WebhookMessage.id == message_id)).one_or_none()
    if row is None:
        return  # the endpoint was deleted meanwhile
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
