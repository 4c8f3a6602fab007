"""Resend: up to 100 messages a request through `POST /emails/batch`, with an idempotency key,
reconciled by position.

URL: `resend://API_KEY@` with optional `?endpoint=BASE_URL`.

Guarantees, and why:

- One request per batch, never retried here (see `broadside/providers/http.py`); `pace()` right
  before it (invariant 2).
- The batch's `Idempotency-Key` is sent as given: Resend answers a second request with the same
  key and the same payload (for 24 hours) with the first answer's ids and sends nothing again,
  so the worker may retry an ambiguous batch with its key. The same key with a different payload
  is refused (409 `invalid_idempotent_request`); the payload is built only from the messages
  (no date, no random MIME boundary), so the same messages always give the same payload.
- `x-batch-validation: permissive`: an invalid message is refused alone instead of failing the
  whole batch. Resend then answers `{"data": [{"id"}…], "errors": [{"index", "message"}]}`,
  where `data` holds the accepted messages in the order of the indices *not* in `errors`. Each
  position i is reconciled against item i of the request through those indices, never by id:
  a refused one is `DeliveryError("api", 422, message, provider_code="validation_error")` (the
  only reason permissive mode refuses one message), an accepted one `SendResult(200, "queued",
  provider_id=id)`. An answer that does not account for every message raises phase `response`.
- A whole-request error (401 `missing_api_key`/`restricted_api_key`, 403 `invalid_api_key`,
  422 `validation_error`, 429 `rate_limit_exceeded` with Retry-After, 409 idempotency refusals,
  5xx) raises phase `api` with the HTTP status and Resend's error `name` as `provider_code`.
- Our MIME message is turned into Resend's fields (from, to, subject, text, html, reply_to);
  List-Unsubscribe, List-Unsubscribe-Post, Message-ID and X-* headers travel in `headers`;
  attachments in `attachments` (`[{"filename", "content": base64}]`; Resend takes the type
  from the name).
- Resend's batch endpoint takes no attachments (its documentation says so), so a batch whose
  messages carry them goes one `POST /emails` per message (`http.in_turns`), each with the
  batch's idempotency key and its position: a retried batch sends none twice. The first
  one's failure is the batch's; a 422 is that message's refusal alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from broadside.core.transport_urls import options
from broadside.delivery.providers.addressing import addressed
from broadside.delivery.providers.http import (
    MAX_ERROR_WORDS,
    Answer,
    HttpClient,
    Pace,
    ProviderTransport,
    api_error,
    check_batch_size,
    clip,
    fields_of,
    in_turns,
    no_pace,
    unreadable,
)
from broadside.delivery.transports import DeliveryError, InBatches, Outgoing, SendResult
from broadside.mail.message_refs import TAG_NAME, ref_for

BASE_URL = "https://api.resend.com"
MAX_IDEMPOTENCY_KEY = 256
REJECT_STATUS = 422  # what Resend answers a whole batch refused for the same reason


class ResendTransport(ProviderTransport):
    scheme = "resend"
    batch_limit = 100
    idempotent = True  # the same key and payload within 24 hours: the first answer, no resend

    def __init__(self, url: str, timeout: float = 30.0, *, allow_private: bool = False) -> None:
        key = unquote(urlsplit(url).username or "")
        self._http = HttpClient(self.scheme, options(url).get("endpoint") or BASE_URL, timeout, {
            "Authorization": f"Bearer {key}",
            "Accept": "application/json",
            "Content-Type": "application/json",
        }, allow_private=allow_private)
        self._answers = self._http

    @property
    def description(self) -> str:
        return f"resend ({self._http.base_url})"

    def shape(self) -> InBatches:
        return InBatches(self)

    @addressed
    def send_batch(self, items: Sequence[Outgoing], idempotency_key: str,
                   pace: Pace = no_pace) -> list[SendResult | DeliveryError]:
        """One `POST /emails/batch` carrying `idempotency_key` (none when it is empty)."""
        check_batch_size(items, self.batch_limit)
        if len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
            raise ValueError(f"an idempotency key is at most {MAX_IDEMPOTENCY_KEY} characters")
        if not items:
            return []
        messages = [self._message(item) for item in items]
        if any("attachments" in message for message in messages):
            return in_turns([[i] for i in range(len(items))],
                            lambda group: self._one(messages[group[0]], idempotency_key,
                                                    group[0], pace), self.scheme)
        body = json.dumps(messages).encode()
        headers = {"x-batch-validation": "permissive"}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        answer = self._http.request("POST", "/emails/batch", body=body, headers=headers, pace=pace)
        if answer.status != 200:
            raise self._error(answer)
        return self._reconcile(answer, len(items))

    def _one(self, message: dict[str, Any], idempotency_key: str, index: int,
             pace: Pace) -> list[SendResult | DeliveryError]:
        """One message with attachments through `POST /emails` (the batch endpoint takes
        none), its key the batch's with its position, so a retried batch sends none twice.
        A 422 refuses this message alone."""
        headers = {}
        if idempotency_key:
            headers["Idempotency-Key"] = f"{idempotency_key[:MAX_IDEMPOTENCY_KEY - 4]}-{index}"
        answer = self._http.request("POST", "/emails", body=json.dumps(message).encode(),
                                    headers=headers, pace=pace)
        if answer.status == REJECT_STATUS:
            return [self._error(answer)]
        if answer.status != 200:
            raise self._error(answer)
        body = answer.json()
        message_id = body.get("id") if isinstance(body, dict) else None
        if not message_id:
            raise unreadable(self.scheme, answer, "an accepted message without an id")
        return [SendResult(200, "queued", provider_id=str(message_id))]

    def _reconcile(self, answer: Answer, count: int) -> list[SendResult | DeliveryError]:
        body = answer.json()
        data = body.get("data") if isinstance(body, dict) else None
        errors = (body.get("errors") or []) if isinstance(body, dict) else None
        if not isinstance(data, list) or not isinstance(errors, list):
            raise unreadable(self.scheme, answer, "expected data and errors lists")
        refused: dict[int, str] = {}
        for error in errors:
            index = error.get("index") if isinstance(error, dict) else None
            if not isinstance(index, int) or not 0 <= index < count or index in refused:
                raise unreadable(self.scheme, answer, "an error without a valid index")
            refused[index] = str(error.get("message") or "refused")
        if len(data) != count - len(refused):
            raise unreadable(self.scheme, answer, f"{len(data)} ids for {count - len(refused)} messages")
        accepted = iter(data)  # in the order of the positions not refused
        results: list[SendResult | DeliveryError] = []
        for position in range(count):
            if position in refused:
                results.append(DeliveryError("api", REJECT_STATUS, clip(refused[position], MAX_ERROR_WORDS),
                                             provider=self.scheme, provider_code="validation_error"))
                continue
            entry = next(accepted)
            message_id = entry.get("id") if isinstance(entry, dict) else None
            if not message_id:
                raise unreadable(self.scheme, answer, "an accepted message without an id")
            results.append(SendResult(200, "queued", provider_id=str(message_id)))
        return results

    @staticmethod
    def _message(item: Outgoing) -> dict[str, Any]:
        fields = fields_of(item)
        message: dict[str, Any] = {"from": fields.sender, "to": [fields.to], "subject": fields.subject}
        if fields.html is not None:
            message["html"] = fields.html
        if fields.text is not None:
            message["text"] = fields.text
        if fields.reply_to:
            message["reply_to"] = fields.reply_to
        if fields.headers:
            message["headers"] = dict(fields.headers)
        if fields.attachments:
            message["attachments"] = [{"filename": a.name, "content": a.base64}
                                      for a in fields.attachments]
        # Resend echoes tags in its webhooks: our reference finds the row even when the
        # worker died before recording Resend's id (broadside.mail.message_refs).
        ref = next((ref_for(v) for n, v in fields.headers if n.lower() == "message-id"), None)
        if ref:
            message["tags"] = [{"name": TAG_NAME, "value": ref}]
        return message

    def _error(self, answer: Answer) -> DeliveryError:
        body = answer.json()
        if isinstance(body, dict):
            name = body.get("name")
            return api_error(self.scheme, answer, str(body.get("message") or body.get("error") or ""),
                             None if name is None else str(name))
        return api_error(self.scheme, answer)

    def check(self) -> str:
        """`GET /domains`: the key works; nothing is sent. A key restricted to sending cannot
        list domains (401 `restricted_api_key`), which still proves it is a valid key."""
        answer = self._http.request("GET", "/domains")
        if answer.status != 200:
            error = self._error(answer)
            if error.provider_code == "restricted_api_key":
                return "resend: API key accepted (sending access only)"
            raise error
        body = answer.json()
        domains = body.get("data") if isinstance(body, dict) else None
        if not isinstance(domains, list):
            raise unreadable(self.scheme, answer, "expected a list of domains")
        shown = ", ".join(f"{d.get('name')} ({d.get('status')})" for d in domains if isinstance(d, dict))
        return f"resend: {len(domains)} domain{'s' if len(domains) != 1 else ''}" + (
            f": {shown}" if shown else "")

    def close(self) -> None:
        self._http.close()
