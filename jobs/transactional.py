"""Transactional mail (test sends, confirmations): the same claim, pace, guards and outcome
policy as broadcasts.

Claim before send (invariant 4): pending -> sending is one guarded UPDATE committed before any
SMTP; every later write is guarded by `status = 'sending'`, so orphan repair's `unknown`
(invariant 5) is never overwritten. The pace is the worker's one pacer (invariant 2). Errors
are classified once (invariant 6) and mapped by `jobs.classify.next_step`, the policy
broadcasts use; it says precisely why a transactional message never pauses anything.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from email.utils import formataddr, parseaddr

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.models import TransactionalMessage
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.delivery.transports import DeliveryError
from broadside.mail.rendering import RenderedEmail, message_bytes
from jobs.classify import Step, backoff, classify, next_step
from jobs.runtime import Runtime

log = logging.getLogger("broadside.worker")


def _finish(session: Session, row_id: int, status: str, **values) -> None:
    # `row_id`, not `message_id`: that is a column written through **values (the Message-ID).
    session.execute(
        update(TransactionalMessage)
        .where(TransactionalMessage.id == row_id, TransactionalMessage.status == "sending")
        .values(status=status, **values)
    )
    session.commit()


def send_transactional(session: Session, rt: Runtime, message_id: int) -> str:
    now = utcnow()
    # Claim before send (invariant 4): a duplicated job finds the row gone from `pending`.
    claimed = session.execute(
        update(TransactionalMessage)
        .where(
            TransactionalMessage.id == message_id,
            TransactionalMessage.status == "pending",
            or_(TransactionalMessage.next_attempt_at.is_(None), TransactionalMessage.next_attempt_at <= now),
        )
        .values(status="sending", attempts=TransactionalMessage.attempts + 1)
    )
    session.commit()
    if rowcount(claimed) != 1:
        return "nothing"
    # (A paused identity's worker takes no job at all: see jobs.worker.)
    message = session.get_one(TransactionalMessage, message_id)
    session.refresh(message)
    if not rt.lease.still_mine():
        _finish(session, message_id, "pending", attempts=message.attempts - 1)
        return "lost-lease"

    headers = dict(message.headers or {})
    from_name, from_email = headers.pop("From-Name", None), headers.pop("From-Email", None)
    if not from_email:
        settings = get_settings(session)
        session.commit()
        if settings.sender_email:
            from_name, from_email = settings.sender_name, settings.sender_email
        else:
            from_name, from_email = parseaddr(rt.config["MAIL_FROM"])
    domain = from_email.rpartition("@")[2] or "localhost"
    msgid = f"<broadside.t{message.id}@{domain}>"
    headers["X-Broadside-Kind"] = message.kind
    payload = message_bytes(
        RenderedEmail(subject=message.subject, html=message.html, text=message.text),
        from_addr=formataddr((from_name or "", from_email)),
        to_addr=message.to_email,
        message_id=msgid,
        headers=headers,
    )
    try:
        rt.hourly.record()
    except Exception:  # the cap is advisory when Redis hiccups
        pass
    try:
        result = rt.transport.send(from_email, message.to_email, payload, pace=rt.pacer.wait)
    except DeliveryError as error:
        verdict = classify(error)
        step, _ = next_step(verdict, lambda: message.attempts, pausable=False)
        if step is Step.UNKNOWN:
            _finish(session, message_id, "unknown", reason=verdict.summary, message_id=msgid)
            return "unknown"
        if step is Step.THROTTLE:
            # Not an attempt against this message: the provider asked the stream to wait.
            wait = rt.throttled(verdict.retry_after)
            _finish(session, message_id, "pending", reason=verdict.summary,
                    attempts=message.attempts - 1,
                    next_attempt_at=utcnow() + timedelta(seconds=wait))
            return "retry"
        if step in (Step.FAILED, Step.EXHAUSTED):
            _finish(session, message_id, "failed", reason=verdict.summary, message_id=msgid)
            log.warning("transactional message %s failed: %s", message_id, verdict.summary)
            return "failed"
        base = float(rt.config.get("RETRY_BASE_SECONDS", 30))
        _finish(
            session,
            message_id,
            "pending",
            reason=verdict.summary,
            next_attempt_at=utcnow() + backoff(message.attempts, base),
        )
        return "retry"
    _finish(
        session,
        message_id,
        "sent",
        sent_at=utcnow(),
        message_id=msgid,
        provider_message_id=result.provider_id,
        reason=f"{result.code} {result.reply}"[:500],
    )
    log.info("transactional message %s (%s) sent", message_id, message.kind)
    return "sent"


def due_transactional(session: Session, identity_id: int | None = None) -> list[int]:
    """The pending messages of one identity's stream that are due now."""
    now = utcnow()
    return list(
        session.scalars(
            select(TransactionalMessage.id)
            .where(
                TransactionalMessage.status == "pending",
                TransactionalMessage.identity_id.is_(None) if identity_id is None
                else TransactionalMessage.identity_id == identity_id,
                or_(
                    TransactionalMessage.next_attempt_at.is_(None),
                    TransactionalMessage.next_attempt_at <= now,
                ),
            )
            .order_by(TransactionalMessage.id)
            .limit(500)
        )
    )
