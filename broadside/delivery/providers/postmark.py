"""Postmark: up to 500 messages a request through `POST /email/batch`, reconciled by position.

URL: `postmark://SERVER_TOKEN@` with optional `?endpoint=BASE_URL` and `?stream=NAME`.

Guarantees, and why:

- One request per batch, never retried here (see `broadside/providers/http.py`); `pace()` right
  before it (invariant 2).
- Postmark answers 200 even when single messages fail: an array in request order, each with an
  `ErrorCode` (0 = accepted). Position i of the answer is item i of the request, whatever ids or
  addresses come back, so a reject lands on the right person. A reject is
  `DeliveryError("api", 422, Message, provider_code=str(ErrorCode))` (406 inactive recipient,
  300 invalid request, …) in its place; an accepted message is `SendResult(200, Message,
  provider_id=MessageID)`. An answer we cannot map position by position (not a list, or not one
  entry per message) raises phase `response`: the messages may have been accepted.
- A whole-request error (401 bad token, 422 `{"ErrorCode", "Message"}` such as 400 "sender
  signature not found", 429, 5xx) raises phase `api` with the HTTP status and the `ErrorCode`.
- The message stream is `?stream=` when given, else "outbound", the transactional stream every
  Postmark server has and the one Postmark uses when a message names none: the URL alone never
  picks a stream the owner did not ask for. Postmark's policy wants bulk mail on a broadcast
  stream, so a newsletter sender's URL should say `?stream=broadcast` (or its own stream name).
- Our MIME message is turned into Postmark's fields (From, To, Subject, TextBody, HtmlBody,
  ReplyTo); List-Unsubscribe, List-Unsubscribe-Post, Message-ID and X-* headers travel in
  `Headers`, so one-click unsubscribe survives the conversion; attachments in `Attachments`
  (`[{"Name", "Content": base64, "ContentType"}]`, each file encoded once for the batch).
- A request carries at most 50 MB (Postmark's batch limit): a batch whose attachments come to
  more goes as consecutive requests of at most MAX_REQUEST_BYTES (`http.in_turns`: the first
  one's failure is the batch's; a later one's is its messages', and the rest are not sent).
  Postmark refuses one message over its own 10 MB with that message's ErrorCode.
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

BASE_URL = "https://api.postmarkapp.com"
DEFAULT_STREAM = "outbound"
REJECT_STATUS = 422  # the HTTP status Postmark gives a whole request refused for the same reasons
# Postmark takes at most 50 MB in one batch request: a batch whose attachments come to more is
# sent as several requests (`in_turns`), each under this.
MAX_REQUEST_BYTES = 45 * 1024 * 1024


def _within(messages: list[bytes], budget: int) -> list[list[int]]:
    """The messages' positions in consecutive groups of at most `budget` bytes each (a message
    larger than that alone: Postmark says why it refuses it)."""
    groups: list[list[int]] = [[]]
    size = 0
    for index, message in enumerate(messages):
        if groups[-1] and size + len(message) > budget:
            groups.append([])
            size = 0
        groups[-1].append(index)
        size += len(message) + 2
    return groups


class PostmarkTransport(ProviderTransport):
    scheme = "postmark"
    batch_limit = 500

    def __init__(self, url: str, timeout: float = 30.0, *, allow_private: bool = False) -> None:
        opts = options(url)
        token = unquote(urlsplit(url).username or "")
        self.stream = opts.get("stream") or DEFAULT_STREAM
        self._http = HttpClient(self.scheme, opts.get("endpoint") or BASE_URL, timeout, {
            "X-Postmark-Server-Token": token,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }, allow_private=allow_private)
        self._answers = self._http

    @property
    def description(self) -> str:
        return f"postmark ({self._http.base_url}, stream {self.stream})"

    def shape(self) -> InBatches:
        return InBatches(self)

    @addressed
    def send_batch(self, items: Sequence[Outgoing], idempotency_key: str,
                   pace: Pace = no_pace) -> list[SendResult | DeliveryError]:
        """One `POST /email/batch`. Postmark has no idempotency key: `idempotency_key` is unused."""
        check_batch_size(items, self.batch_limit)
        if not items:
            return []
        messages = [json.dumps(self._message(item)).encode() for item in items]
        groups = _within(messages, MAX_REQUEST_BYTES)
        if len(groups) == 1:
            return self._request(messages, pace)
        return in_turns(groups, lambda group: self._request([messages[i] for i in group], pace),
                        self.scheme)

    def _request(self, messages: list[bytes], pace: Pace) -> list[SendResult | DeliveryError]:
        body = b"[" + b", ".join(messages) + b"]"
        answer = self._http.request("POST", "/email/batch", body=body, pace=pace)
        if answer.status != 200:
            raise self._error(answer)
        entries = answer.json()
        if not isinstance(entries, list) or len(entries) != len(messages):
            raise unreadable(self.scheme, answer, f"expected a list of {len(messages)} results")
        if not all(isinstance(entry, dict) for entry in entries):
            raise unreadable(self.scheme, answer, "expected one object per message")
        return [self._outcome(entry) for entry in entries]

    def _message(self, item: Outgoing) -> dict[str, Any]:
        fields = fields_of(item)
        message: dict[str, Any] = {"From": fields.sender, "To": fields.to, "Subject": fields.subject}
        if fields.html is not None:
            message["HtmlBody"] = fields.html
        if fields.text is not None:
            message["TextBody"] = fields.text
        if fields.reply_to:
            message["ReplyTo"] = fields.reply_to
        message["Headers"] = [{"Name": name, "Value": value} for name, value in fields.headers]
        message["MessageStream"] = self.stream
        if fields.attachments:
            message["Attachments"] = [{"Name": a.name, "Content": a.base64,
                                       "ContentType": a.content_type}
                                      for a in fields.attachments]
        # Postmark echoes Metadata in its webhooks: our reference finds the row even when the
        # worker died before recording Postmark's MessageID (broadside.mail.message_refs).
        ref = next((ref_for(v) for n, v in fields.headers if n.lower() == "message-id"), None)
        if ref:
            message["Metadata"] = {TAG_NAME: ref}
        return message

    def _outcome(self, entry: dict[str, Any]) -> SendResult | DeliveryError:
        code = entry.get("ErrorCode")
        said = str(entry.get("Message") or "")
        if code == 0:
            return SendResult(200, said or "OK", provider_id=str(entry.get("MessageID") or "") or None)
        return DeliveryError("api", REJECT_STATUS, clip(said or f"ErrorCode {code}", MAX_ERROR_WORDS),
                             provider=self.scheme, provider_code=str(code))

    def _error(self, answer: Answer) -> DeliveryError:
        body = answer.json()
        if isinstance(body, dict):
            code = body.get("ErrorCode")
            return api_error(self.scheme, answer, str(body.get("Message") or ""),
                             None if code is None else str(code))
        return api_error(self.scheme, answer)

    def check(self) -> str:
        """`GET /server`: the token works; nothing is sent."""
        answer = self._http.request("GET", "/server")
        if answer.status != 200:
            raise self._error(answer)
        body = answer.json()
        if not isinstance(body, dict):
            raise unreadable(self.scheme, answer, "expected the server's details")
        return f"postmark: server {body.get('Name', '?')!r}, stream {self.stream!r}"

    def close(self) -> None:
        self._http.close()
