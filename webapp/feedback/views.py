"""Feedback from the mail provider: its webhooks telling of deliveries, bounces and complaints
(public, no CSRF: each request proves itself). The domain is `broadside.feedback`; the
webhooks Broadside itself sends to the owner's systems are `webapp/settings/webhooks.py` and
`webapp/api/webhooks.py`. The URLs keep their /webhooks/ prefix (providers are configured with
them) and so does the blueprint's name (`webhooks.events`, `webhooks.ses`, ...).

- POST /webhooks/events  generic JSON with `X-Broadside-Timestamp: <Unix seconds>` and
                         `X-Broadside-Signature: sha256=<hex HMAC-SHA256, keyed with
                         WEBHOOK_SECRET, of "<timestamp>.<raw body>">`; 401 and nothing
                         written when either is missing or wrong, the timestamp is more than
                         five minutes from now, or WEBHOOK_SECRET is unset. The payload's `id`
                         is claimed once: a repeat is acknowledged (200) and changes nothing.
- POST /webhooks/ses     Amazon SES notifications through SNS: the SNS signature is verified,
                         the TopicArn must be listed in SNS_TOPIC_ARNS, the signed Timestamp
                         must be recent (see broadside.feedback.replay), a MessageId counts
                         once, and the subscription handshake is completed by visiting
                         SubscribeURL.

- POST /webhooks/postmark/<identity id>, /webhooks/resend/<identity id>,
  /webhooks/mailgun/<identity id>   a provider's own delivery, bounce and complaint events for
                         one sending identity (without an id: the default identity, whose
                         secret is WEBHOOK_SECRET). 404 unless that identity exists and sends
                         through that provider; 401 when it has no webhook secret or the
                         request does not prove itself by the provider's scheme (Basic auth
                         for Postmark, Svix signatures for Resend, Mailgun's signed token:
                         broadside.feedback.providers); 400 for a body that is not the
                         provider's shape. Each event counts once (its id claimed in Redis,
                         per identity); a delivery settles a message left `unknown`
                         (broadside.feedback.settle). Events we do not use get 200 "ignored".

Replay protection needs Redis (the seen ids live there): while it is unreachable, events are
refused with a 503, which providers retry, rather than applied without that protection. A
body over MAX_BODY_BYTES is refused with a 413 before it is read.

Known or unknown address or message, the answer is the same (nothing to learn about who
subscribes).
"""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, jsonify, request
from redis.exceptions import RedisError

from broadside.delivery.identities.service import SendingIdentity
from broadside.feedback import payloads, provider_payloads, providers, replay, service, sns
from broadside.feedback.service import webhook_identity
from broadside.feedback.settle import Senders
from webapp.extensions import csrf, db, get_redis
from webapp.security import public

log = logging.getLogger("broadside.feedback")

bp = Blueprint("webhooks", __name__, url_prefix="/webhooks")
csrf.exempt(bp)

MAX_BODY_BYTES = 512 * 1024  # SNS messages are at most 256 KB


@bp.before_request
def limit_body_size() -> None:
    request.max_content_length = MAX_BODY_BYTES


def _error(status: int, message: str):
    return jsonify(error=message), status


def _seen(prefix: str) -> replay.SeenIds:
    return replay.SeenIds(get_redis(), current_app.config["BROADSIDE_NAMESPACE"], prefix)


def _apply_once(seen: replay.SeenIds, event_id: str, events: list[payloads.ProviderEvent],
                senders: Senders, applied: tuple[str, int]):
    """Apply `events` unless `event_id` was claimed before (then 200, nothing changes)."""
    try:
        first = seen.claim(event_id)
    except RedisError as exc:
        log.warning("webhook event not applied: Redis unreachable (%s)", type(exc).__name__)
        return _error(503, "Cannot check this event against those already received; "
                           "retry later.")
    if not first:
        log.info("webhook event already received (%s); nothing changed", seen.prefix)
        return jsonify(status="duplicate"), 200
    try:
        service.apply_events(db.session, events, senders)
    except Exception:
        db.session.rollback()
        try:
            seen.forget(event_id)  # the provider retries; let the retry count
        except RedisError:
            pass
        raise
    return jsonify(status=applied[0]), applied[1]


@bp.post("/events")
@public("a provider's webhook: the HMAC-SHA256 signature of the body is the credential")
def events():
    body = request.get_data(cache=False)
    try:
        replay.check_generic(current_app.config.get("WEBHOOK_SECRET") or "", body,
                             request.headers.get(replay.TIMESTAMP_HEADER),
                             request.headers.get(replay.SIGNATURE_HEADER))
    except replay.Refused as exc:
        log.warning("webhook refused: %s", exc.message)
        return _error(401, exc.message)
    event = payloads.parse_generic(body)
    # Bounces and complaints only (no delivery settles here); it speaks for the default
    # identity, whose secret WEBHOOK_SECRET is.
    return _apply_once(_seen("webhooks:seen"), event.event_id, [event], Senders(default=True),
                       ("accepted", 202))


def _allowed_topics() -> set[str]:
    value = current_app.config.get("SNS_TOPIC_ARNS") or ""
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return {str(arn).strip() for arn in value if str(arn).strip()}


def _http_get() -> sns.HttpGet:
    return current_app.config.get("SNS_HTTP_GET") or sns.urllib_get


def _certificate_cache() -> sns.CertificateCache:
    return current_app.extensions.setdefault("broadside_sns_certificates", sns.CertificateCache())


@bp.post("/ses")
@public("Amazon SNS: its signature, verified against Amazon's certificate, is the credential")
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
    # After the signature (only a signed Timestamp means anything), and for every Type: an
    # old SubscriptionConfirmation replayed could re-subscribe us after an unsubscribe.
    try:
        replay.check_sns_timestamp(message["Timestamp"])
    except replay.Refused as exc:
        log.warning("SNS message refused: %s", exc.message)
        return _error(401, exc.message)

    if message["Type"] == "SubscriptionConfirmation":
        try:
            sns.confirm_subscription(message, _http_get())
        except payloads.BadPayload:
            raise
        except Exception as exc:
            log.warning("SNS subscription not confirmed: %s", exc)
            return _error(502, "Could not visit SubscribeURL; retry later.")
        log.info("SNS subscription to %s confirmed", message["TopicArn"])
        return jsonify(status="subscribed"), 200
    if message["Type"] == "UnsubscribeConfirmation":
        return jsonify(status="ignored"), 200

    events = payloads.parse_ses_notification(message["Message"])
    # SNS delivers at least once (and a captured message could be posted again within the
    # Timestamp bound): count each MessageId once.
    return _apply_once(_seen("sns:seen"), message["MessageId"], events,
                       service.ses_senders(db.session, current_app.config), ("processed", 200))


# ------------------------------------------------------------------ providers' own webhooks

def _identity(identity_id: int | None, scheme: str) -> SendingIdentity:
    return webhook_identity(db.session, current_app.config, identity_id, scheme)


def _refused(exc: replay.Refused, scheme: str, identity_id: int | None):
    log.warning("%s webhook for identity %s refused: %s", scheme, identity_id or "default",
                exc.message)
    response = jsonify(error=exc.message)
    if scheme == "postmark":
        # Clients that send Basic credentials only when challenged get the challenge.
        response.headers["WWW-Authenticate"] = 'Basic realm="Broadside webhooks"'
    return response, 401


def _seen_for(scheme: str, identity: SendingIdentity) -> replay.SeenIds:
    # Per identity: two identities on one provider account may both receive the same event.
    return _seen(f"{scheme}:seen:{identity.key}")


def _provider_events(scheme: str, key: str, identity: SendingIdentity,
                     events: list[payloads.ProviderEvent]):
    if not events:
        return jsonify(status="ignored"), 200
    return _apply_once(_seen_for(scheme, identity), key, events, service.senders_of(identity),
                       ("processed", 200))


@bp.post("/postmark", endpoint="postmark_default")
@bp.post("/postmark/<int:identity_id>")
@public("Postmark's webhook: HTTP Basic with the identity's webhook secret (or WEBHOOK_SECRET)")
def postmark(identity_id: int | None = None):
    try:
        identity = _identity(identity_id, "postmark")
        providers.check_postmark(request.headers.get("Authorization"), identity.webhook_secret)
    except replay.Refused as exc:
        return _refused(exc, "postmark", identity_id)
    record = provider_payloads.parse_postmark(request.get_data(cache=False))
    return _provider_events("postmark", record.key, identity, record.events)


@bp.post("/resend", endpoint="resend_default")
@bp.post("/resend/<int:identity_id>")
@public("Resend's webhook: a Svix signature keyed with the identity's webhook secret (or WEBHOOK_SECRET)")
def resend(identity_id: int | None = None):
    try:
        identity = _identity(identity_id, "resend")
        body = request.get_data(cache=False)
        event_id = providers.check_resend(
            request.headers.get(providers.SVIX_ID), request.headers.get(providers.SVIX_TIMESTAMP),
            request.headers.get(providers.SVIX_SIGNATURE), body, identity.webhook_secret)
    except replay.Refused as exc:
        return _refused(exc, "resend", identity_id)
    return _provider_events("resend", event_id, identity, provider_payloads.parse_resend(body))


@bp.post("/mailgun", endpoint="mailgun_default")
@bp.post("/mailgun/<int:identity_id>")
@public("Mailgun's webhook: its signed token, keyed with the identity's webhook secret (or WEBHOOK_SECRET)")
def mailgun(identity_id: int | None = None):
    try:
        identity = _identity(identity_id, "mailgun")
    except replay.Refused as exc:
        return _refused(exc, "mailgun", identity_id)
    # Mailgun signs inside the body: read it as JSON first (400 when it is not).
    body = payloads.json_object(request.get_data(cache=False), "The body")
    try:
        token = providers.check_mailgun(body.get("signature"), identity.webhook_secret)
    except replay.Refused as exc:
        return _refused(exc, "mailgun", identity_id)
    return _provider_events("mailgun", token, identity, provider_payloads.parse_mailgun(body))
