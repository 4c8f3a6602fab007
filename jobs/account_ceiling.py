"""A stream's handle on its provider account's ceiling (broadside.delivery.account_limit): built
when the stream starts, its rate followed at each maintenance tick, SES's MaxSendRate read
again every hour.

The rate is the account's `account_rate` (the smallest set on any of its identities: the
stream restarts when it changes, jobs.supervisor), never above 90 % of SES's MaxSendRate once
that is known. The SES figure is read by `GetAccount` when the owner checks the identity
(webapp/doctor/identities.py) and here, by the maintenance thread, when the one kept in Redis
is older than an hour; both keep it in Redis under the account's HMAC, where every stream of
the account reads it."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from broadside.core.transport_urls import SMTP_SCHEMES
from broadside.delivery import account_limit
from broadside.delivery.identities.service import SendingIdentity
from broadside.delivery.providers.factory import make_transport
from broadside.delivery.providers.http import ProviderTransport
from broadside.delivery.transports import DeliveryError, Transport

log = logging.getLogger("broadside.worker")

SES_READ_EVERY_S = 3600.0
SES_READ_TIMEOUT_S = 5.0


def build(identity: SendingIdentity, redis: Redis, config: Mapping[str, Any]) -> account_limit.Ceiling | None:
    """The identity's account's ceiling. None for the outbox (no account), and for SMTP with no
    account_rate: an SMTP server says nothing of an account's budget and answers no 429, so
    there is nothing to hold and no round trip is spent per message."""
    digest = account_limit.account_digest(identity.transport_url, config["SECRET_KEY"])
    if digest is None or (identity.account_rate is None and identity.scheme in SMTP_SCHEMES):
        return None
    ceiling = account_limit.Ceiling(redis, config["BROADSIDE_NAMESPACE"], digest, identity.account_rate)
    try:
        follow(ceiling, identity)
    except RedisError:
        pass  # followed again at the next tick
    return ceiling


def follow(ceiling: account_limit.Ceiling, identity: SendingIdentity) -> None:
    """The ceiling's rate as it stands: the account's rate under SES's cap (raises RedisError)."""
    ses = account_limit.ses_max_rate(ceiling.redis, ceiling.namespace, ceiling.digest)
    ceiling.rate = account_limit.effective_rate(identity.account_rate, ses)


def listen(transport: Transport, ceiling: account_limit.Ceiling) -> None:
    """A provider's answer saying no budget remains until a reset holds the whole account."""
    if not isinstance(transport, ProviderTransport):
        return

    def heard(headers: Mapping[str, str]) -> None:
        wait = account_limit.budget_wait(headers)
        if wait is not None:
            try:
                ceiling.hold(wait)
            except RedisError:
                pass  # the provider's 429, should it come, holds the stream in any case

    transport.listen(heard)


class SesRates:
    """Reads SES's MaxSendRate again when the stored one is older than SES_READ_EVERY_S."""

    def __init__(self) -> None:
        self.read_at: dict[str, float] = {}

    def due(self, identity: SendingIdentity) -> bool:
        return (identity.scheme == "ses"
                and time.monotonic() - self.read_at.get(identity.transport_url, float("-inf"))
                >= SES_READ_EVERY_S)

    def read(self, identity: SendingIdentity, ceiling: account_limit.Ceiling,
             config: Mapping[str, Any], instance_path: str) -> None:
        self.read_at[identity.transport_url] = time.monotonic()
        try:
            transport = make_transport(identity.transport_url, instance_path, SES_READ_TIMEOUT_S,
                                       allow_private=bool(config.get("PROVIDER_ENDPOINTS_ALLOW_PRIVATE")))
            try:
                transport.check()
                rate = transport.max_send_rate if isinstance(transport, ProviderTransport) else None
            finally:
                transport.close()
        except DeliveryError as exc:
            log.warning("SES's sending rate could not be read for identity %s: %s", identity.name, exc)
            return
        if rate:
            account_limit.record_ses_max_rate(ceiling.redis, ceiling.namespace, ceiling.digest, rate)
            log.info("SES allows %g messages/s to identity %s's account; its ceiling stays under "
                     "%g", rate, identity.name, account_limit.SES_SHARE * rate)
