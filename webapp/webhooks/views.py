"""Webhooks from the mail provider (public, no CSRF: each request proves itself).

- POST /webhooks/events  generic JSON, `X-Broadside-Signature: <hex HMAC-SHA256 of the raw
                         body keyed with WEBHOOK_SECRET>`; 401 and nothing written when the
                         signature is missing or wrong, or WEBHOOK_SECRET is unset.
- POST /webhooks/ses     Amazon SES notifications through SNS: the SNS signature is verified,
                         the TopicArn must be listed in SNS_TOPIC_ARNS, and the
                         subscription handshake is completed by visiting SubscribeURL.

Known or unknown address, the answer is the same (nothing to learn about who subscribes).
"""

from __future__ import annotations

import hashlib
import hmac
import logging

from flask import Blueprint, current_app, jsonify, request
from redis.exceptions import RedisError

from broadside.webhooks import payloads, service, sns
from webapp.extensions import csrf, db, get_redis, namespaced
from webapp.security import public

log = logging.getLogger("broadside.webhooks")

bp = Blueprint("webhooks", __name__, url_prefix="/webhooks")
csrf.exempt(bp)

MAX_BODY_BYTES = 512 * 1024  # SNS messages are at most 256 KB
SNS_SEEN_SECONDS = 7 * 24 * 3600


@bp.before_request
def limit_body_size() -> None:
    request.max_content_length = MAX_BODY_BYTES


def _error(status: int, message: str):
    return jsonify(error=message), status


def signature_is_valid(secret: str, body: bytes, header: str) -> bool:
    """Constant-time check of a hex HMAC-SHA256 (an optional `sha256=` prefix is allowed)."""
    if not secret or not header:
        return False
    given = header.strip()
    if given.lower().startswith("sha256="):
        given = given[len("sha256="):]
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), given.lower().encode("utf-8", "replace"))


@bp.post("/events")
@public
def events():
    body = request.get_data(cache=False)
    secret = current_app.config.get("WEBHOOK_SECRET") or ""
    if not signature_is_valid(secret, body, request.headers.get("X-Broadside-Signature", "")):
        log.warning("webhook refused: missing or wrong signature")
        return _error(401, "A valid X-Broadside-Signature (hex HMAC-SHA256 of the body keyed "
                           "with WEBHOOK_SECRET) is required.")
    event = payloads.parse_generic(body)
    service.apply_events(db.session, [event])
    return jsonify(status="accepted"), 202


def _allowed_topics() -> set[str]:
    value = current_app.config.get("SNS_TOPIC_ARNS") or ""
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return {str(arn).strip() for arn in value if str(arn).strip()}


def _http_get() -> sns.HttpGet:
    return current_app.config.get("SNS_HTTP_GET") or sns.urllib_get


def _certificate_cache() -> sns.CertificateCache:
    return current_app.extensions.setdefault("broadside_sns_certificates", sns.CertificateCache())


def _first_delivery(message_id: str) -> bool:
    """SNS delivers at least once: count a notification once (or, without Redis, anyway)."""
    try:
        return bool(get_redis().set(namespaced(f"sns:seen:{message_id}"), 1, nx=True,
                                    ex=SNS_SEEN_SECONDS))
    except RedisError:
        return True


def _forget(message_id: str) -> None:
    try:
        get_redis().delete(namespaced(f"sns:seen:{message_id}"))
    except RedisError:
        pass


@bp.post("/ses")
@public
def ses():
    message = sns.parse_message(request.get_data(cache=False))
    if message["TopicArn"] not in _allowed_topics():
        log.warning("SNS message refused: topic %s not in SNS_TOPIC_ARNS",
                                   message["TopicArn"])
        return _error(403, "This SNS topic is not listed in SNS_TOPIC_ARNS.")
    try:
        sns.verify(message, _http_get(), _certificate_cache())
    except sns.SignatureInvalid as exc:
        log.warning("SNS message refused: %s", exc)
        return _error(401, f"The SNS signature is not valid: {exc}.")
    except sns.CertificateUnavailable as exc:
        log.warning("SNS message not verified yet: %s", exc)
        return _error(503, "The SNS signing certificate could not be fetched; retry later.")

    if message["Type"] == "SubscriptionConfirmation":
        try:
            sns.confirm_subscription(message, _http_get())
        except payloads.BadPayload:
            raise
        except Exception as exc:  # noqa: BLE001 - report, and let SNS send the handshake again
            log.warning("SNS subscription not confirmed: %s", exc)
            return _error(502, "Could not visit SubscribeURL; retry later.")
        log.info("SNS subscription to %s confirmed", message["TopicArn"])
        return jsonify(status="subscribed"), 200
    if message["Type"] == "UnsubscribeConfirmation":
        return jsonify(status="ignored"), 200

    events = payloads.parse_ses_notification(message["Message"])
    if not _first_delivery(message["MessageId"]):
        return jsonify(status="duplicate"), 200
    try:
        service.apply_events(db.session, events)
    except Exception:
        db.session.rollback()
        _forget(message["MessageId"])  # SNS retries; let the retry count
        raise
    return jsonify(status="processed"), 200
