"""Amazon SES v2: one message a request through `SendEmail` with `Content.Raw`, our MIME bytes as
they are, signed and sent by botocore (the official SDK's core).

URL: `ses://ACCESS_KEY_ID:SECRET@REGION` with optional `?endpoint=BASE_URL`.

Guarantees, and why:

- The raw message is sent unchanged, so every header we wrote, List-Unsubscribe and
  List-Unsubscribe-Post included, reaches the recipient as we wrote it; `FromEmailAddress` is
  the envelope sender. An accepted message is `SendResult(200, "accepted", provider_id=MessageId)`.
- **botocore never retries**: `total_max_attempts=1` is one request in all (tests prove it
  against a 500, a 429 and a dropped connection). Beware the client Config's `max_attempts`:
  it counts *retries*, so `max_attempts=1` would send a throttled message twice. Endpoints
  and settings from the environment or `~/.aws` are ignored: the URL says everything.
- `pace()` runs right before each request leaves (invariant 2): in botocore's `before-send`
  event, after it has serialised and signed the request, so the time botocore spends on
  those (which varies) never shortens the gap the provider sees.
- Failures say whether the message could have been accepted (invariant 5): SES's answer
  (`ClientError`) is phase `api` with the HTTP status and SES's exception name as
  `provider_code` (SES v2 names: `TooManyRequestsException`, `LimitExceededException`,
  `SendingPausedException`, `AccountSuspendedException`, `MailFromDomainNotVerifiedException`,
  `MessageRejected`, `NotFoundException`, `BadRequestException`; a wrong key is 403
  `UnrecognizedClientException` or `InvalidSignatureException`). No connection (refused, DNS,
  connect timeout, a certificate that fails verification) is phase `request`. A read timeout
  or a connection closed before the answer is phase `response`, and so is any other TLS
  error: botocore raises the same `SSLError` for a failed handshake (nothing sent) and for a
  TLS failure after the request (maybe sent), so it must be taken as the ambiguous one.
- **An `?endpoint=` is checked before every request** (`before-send`, for every operation):
  its host is resolved and every address judged as `http.checked_addresses` does (private or
  loopback refused unless `PROVIDER_ENDPOINTS_ALLOW_PRIVATE=1`, link-local and metadata
  always), phase `request` with `ours`, nothing sent. botocore then connects by the name
  again (or reuses a kept-alive connection to an address checked before), so a name whose
  DNS answer flips inside the microseconds between the two look-ups could still reach an
  address not checked: the residual race of not owning botocore's connection pool. AWS's own
  endpoint (no `?endpoint=`) is not looked up: the URL cannot steer it, only name a region.
- Transports share one botocore session (its service model loaded once: ~5 ms a transport
  instead of ~120 ms), behind a lock, as botocore sessions are not thread-safe.
"""

from __future__ import annotations

import functools
import ssl
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import botocore.session  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    ProxyConnectionError,
    SSLError,
)

from broadside.core.transport_urls import endpoint_shown, options
from broadside.delivery.providers.addressing import addressed
from broadside.delivery.providers.http import (
    MAX_CONNECT_TIMEOUT,
    MAX_ERROR_WORDS,
    Pace,
    ProviderTransport,
    check_batch_size,
    checked_addresses,
    clip,
    no_pace,
    parse_retry_after,
)
from broadside.delivery.transports import DeliveryError, Outgoing, SendResult, network_words

# Errors botocore raises before anything is written.
_NOT_SENT = (EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError)
_NOT_STARTED = (ParamValidationError, NoCredentialsError)
_SESSION_LOCK = threading.Lock()


@functools.cache
def _session() -> Any:
    return botocore.session.get_session()


def _create_client(**kwargs: Any) -> Any:
    """An SES v2 client from one shared botocore session: its loaders keep the service model,
    so a transport costs ~5 ms instead of ~120 ms. Sessions are not thread-safe (the web
    app's checks and the worker may build transports at once), hence the lock."""
    with _SESSION_LOCK:
        return _session().create_client("sesv2", **kwargs)


class SesTransport(ProviderTransport):
    scheme = "ses"
    batch_limit = 1

    def __init__(self, url: str, timeout: float = 30.0, *, allow_private: bool = False) -> None:
        parts = urlsplit(url)
        self._allow_private = allow_private
        self.region = parts.hostname or ""
        self.endpoint = options(url).get("endpoint")
        self._shown = endpoint_shown(self.endpoint) if self.endpoint else ""  # no credentials
        config = Config(
            # `total_max_attempts` counts the first attempt; the Config's `max_attempts` would
            # count retries only (1 means two requests), whatever the mode.
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=min(timeout, MAX_CONNECT_TIMEOUT),
            read_timeout=timeout,
            ignore_configured_endpoint_urls=True,
            user_agent_extra="broadside",
        )
        self._client = _create_client(
            region_name=self.region,
            aws_access_key_id=unquote(parts.username or ""),
            aws_secret_access_key=unquote(parts.password or ""),
            endpoint_url=self.endpoint,
            config=config,
        )
        self._pace: Pace = no_pace
        if self.endpoint:
            self._client.meta.events.register("before-send.sesv2", self._check_endpoint)
        self._client.meta.events.register("before-send.sesv2.SendEmail", self._before_send)

    def _check_endpoint(self, **kwargs: Any) -> None:
        """Raises `DeliveryError` (nothing sent) when the endpoint's host resolves to an
        address Broadside may not call; returns None: botocore goes on."""
        assert self.endpoint
        ep = urlsplit(self.endpoint)
        port = ep.port or (443 if ep.scheme == "https" else 80)
        checked_addresses(self.scheme, ep.hostname or "", port, allow_private=self._allow_private,
                          where=self._shown)

    def _before_send(self, **kwargs: Any) -> None:
        self._pace()  # returns None: botocore goes on and sends the request

    @property
    def description(self) -> str:
        return f"ses ({self.region}{', ' + self._shown if self._shown else ''})"

    @addressed
    def send_batch(self, items: Sequence[Outgoing], idempotency_key: str,
                   pace: Pace = no_pace) -> list[SendResult | DeliveryError]:
        """One message (`batch_limit` is 1); SES has no idempotency key."""
        check_batch_size(items, self.batch_limit)
        if not items:
            return []
        [item] = items
        paced: list[bool] = []

        def pace_once() -> None:
            paced.append(True)
            pace()

        self._pace = pace_once
        try:
            answer = self._call("send_email", FromEmailAddress=item.mail_from,
                                Destination={"ToAddresses": [item.rcpt]},
                                Content={"Raw": {"Data": item.message}})
        finally:
            self._pace = no_pace
            if not paced:
                pace()  # refused before any request (a parameter botocore rejects): paced all the same
        return [SendResult(200, "accepted", provider_id=answer.get("MessageId"))]

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = getattr(self._client, operation)(**params)
        except ClientError as exc:
            raise self._api_error(exc) from None
        except _NOT_SENT as exc:
            raise DeliveryError("request", None, self._unreached(exc), network=True,
                                provider=self.scheme) from None
        except SSLError as exc:
            phase = "request" if _certificate_refused(exc) else "response"
            raise DeliveryError(phase, None, self._unreached(exc), network=True,
                                provider=self.scheme) from None
        except NoCredentialsError:
            raise DeliveryError("request", None, "no access key was given for Amazon SES: put "
                                "it in the transport URL", provider=self.scheme) from None
        except _NOT_STARTED as exc:  # botocore's own check of the request, before sending it
            raise DeliveryError("request", None, clip(f"not sent, the request was refused "
                                                      f"before it left: {exc}"),
                                provider=self.scheme) from None
        except BotoCoreError as exc:
            # ReadTimeoutError, ConnectionClosedError, HTTPClientError, …: after the connect,
            # so the request may have been accepted.
            raise DeliveryError("response", None, f"no answer from Amazon SES: "
                                f"{network_words(exc, self.description)}", network=True,
                                provider=self.scheme) from None
        return answer

    def _unreached(self, exc: Exception) -> str:
        return f"could not reach Amazon SES: {network_words(exc, self.description)}"

    def _api_error(self, exc: ClientError) -> DeliveryError:
        response = exc.response
        error = response.get("Error", {})
        meta = response.get("ResponseMetadata", {})
        headers = meta.get("HTTPHeaders", {})
        code = error.get("Code") or None
        return DeliveryError(
            "api", meta.get("HTTPStatusCode"),
            clip(error.get("Message") or code or f"HTTP {meta.get('HTTPStatusCode')}", MAX_ERROR_WORDS),
            provider=self.scheme, provider_code=code,
            retry_after=parse_retry_after(headers.get("retry-after")),
        )

    def check(self) -> str:
        """`GetAccount`: the keys work in this region; nothing is sent. Keeps the account's
        `MaxSendRate` in `max_send_rate`."""
        account = self._call("get_account")
        quota = account.get("SendQuota", {})
        state = "sending enabled" if account.get("SendingEnabled") else "SENDING PAUSED"
        access = "production access" if account.get("ProductionAccessEnabled") else "sandbox"
        rate, sent, most = (quota.get(name, 0)
                            for name in ("MaxSendRate", "SentLast24Hours", "Max24HourSend"))
        # The account's ceiling is kept under 90 % of it (broadside.delivery.account_limit).
        self.max_send_rate = float(rate) if isinstance(rate, (int, float)) and rate > 0 else None
        return (f"ses ({self.region}): {state}, {access}, {rate:g} messages/s, "
                f"{sent:g} of {most:g} sent in 24 h")

    def close(self) -> None:
        self._client.close()


def _certificate_refused(exc: SSLError) -> bool:
    """True when the TLS error is the server's certificate failing verification: that happens
    only during the handshake, before the request."""
    error: BaseException | None = exc.kwargs.get("error")
    while error is not None:
        if isinstance(error, ssl.SSLCertVerificationError):
            return True
        error = error.args[0] if error.args and isinstance(error.args[0], BaseException) else None
    return False
