"""Mailgun: one message a request through `POST /v3/{domain}/messages.mime`, our MIME bytes as
they are.

URL: `mailgun://API_KEY@DOMAIN` with optional `?endpoint=BASE_URL` (EU accounts:
`?endpoint=https://api.eu.mailgun.net`).

Guarantees, and why:

- The message is uploaded unchanged (multipart/form-data: `to` = the envelope recipient,
  `message` = the MIME file), so every header we wrote, List-Unsubscribe and
  List-Unsubscribe-Post included, reaches the recipient as we wrote it.
- One request per message, never retried here (see `broadside/providers/http.py`); `pace()`
  right before it (invariant 2).
- 200 `{"id": "<…>", "message": "Queued. Thank you."}` is `SendResult(200, message,
  provider_id=id)`, the id without its angle brackets, as Mailgun's events name the message.
  Any other status raises phase `api` with the HTTP status and Mailgun's `message` (401
  "Forbidden" for a wrong key, 400 for a refused message, 404 for an unknown domain, 429, 5xx);
  Mailgun gives no error code of its own, so `provider_code` is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote, unquote, urlsplit

from urllib3 import encode_multipart_formdata
from urllib3.util import make_headers

from broadside.core.transport_urls import options
from broadside.delivery.providers.addressing import addressed
from broadside.delivery.providers.http import (
    Answer,
    HttpClient,
    Pace,
    ProviderTransport,
    api_error,
    check_batch_size,
    no_pace,
    unreadable,
)
from broadside.delivery.transports import DeliveryError, Outgoing, SendResult

BASE_URL = "https://api.mailgun.net"


class MailgunTransport(ProviderTransport):
    scheme = "mailgun"
    batch_limit = 1

    def __init__(self, url: str, timeout: float = 30.0, *, allow_private: bool = False) -> None:
        parts = urlsplit(url)
        key = unquote(parts.username or "")
        self.domain = (parts.hostname or "").lower()
        self._http = HttpClient(self.scheme, options(url).get("endpoint") or BASE_URL, timeout, {
            **make_headers(basic_auth=f"api:{key}"),
            "Accept": "application/json",
        }, allow_private=allow_private)
        self._answers = self._http

    @property
    def description(self) -> str:
        return f"mailgun ({self.domain} at {self._http.base_url})"

    @addressed
    def send_batch(self, items: Sequence[Outgoing], idempotency_key: str,
                   pace: Pace = no_pace) -> list[SendResult | DeliveryError]:
        """One message (`batch_limit` is 1); Mailgun has no idempotency key."""
        check_batch_size(items, self.batch_limit)
        if not items:
            return []
        [item] = items
        body, content_type = encode_multipart_formdata([
            ("to", item.rcpt),
            ("message", ("message.mime", item.message, "message/rfc822")),
        ])
        answer = self._http.request("POST", f"/v3/{quote(self.domain)}/messages.mime", body=body,
                                    headers={"Content-Type": content_type}, pace=pace)
        if answer.status != 200:
            raise self._error(answer)
        reply = answer.json()
        message_id = reply.get("id") if isinstance(reply, dict) else None
        if not message_id:
            raise unreadable(self.scheme, answer, "expected the message's id")
        return [SendResult(200, str(reply.get("message") or "Queued"),
                           provider_id=str(message_id).strip("<>"))]

    def _error(self, answer: Answer) -> DeliveryError:
        body = answer.json()
        said = (body.get("message") or body.get("error")) if isinstance(body, dict) else None
        return api_error(self.scheme, answer, str(said) if said else None)

    def check(self) -> str:
        """`GET /v3/domains/{domain}`: the key works and knows the domain; nothing is sent."""
        answer = self._http.request("GET", f"/v3/domains/{quote(self.domain)}")
        if answer.status != 200:
            raise self._error(answer)
        body = answer.json()
        domain = body.get("domain") if isinstance(body, dict) else None
        if not isinstance(domain, dict):
            raise unreadable(self.scheme, answer, "expected the domain's details")
        return f"mailgun: domain {domain.get('name', self.domain)!r} ({domain.get('state', '?')})"

    def close(self) -> None:
        self._http.close()
