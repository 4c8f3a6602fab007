"""The owner's webhook endpoints: save, list, delete, and the only writer of their status.

An endpoint is a URL (checked by `addresses.resolve`: public addresses only unless
`WEBHOOKS_ALLOW_PRIVATE=1`), the events it wants (`EVENT_TYPES`) and a secret Broadside makes
(`signing.new_secret`), shown to the owner when the endpoint is made and on request after.

Status moves through `TRANSITIONS`, each one guarded UPDATE: `disable` (the worker, after a
day in which every attempt failed: `ledger.record_failure`) and `enable` (the owner). Events
are written only for enabled endpoints (`emitter.emit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import WebhookEndpoint, WebhookMessage
from broadside.core.timeutil import utcnow
from broadside.webhooks import EVENT_TYPES, TEST_EVENT, emitter
from broadside.webhooks.addresses import resolve
from broadside.webhooks.signing import new_secret

MAX_ENDPOINTS = 20
FIELDS = ("url", "events")


@dataclass(frozen=True)
class Transition:
    sources: tuple[str, ...]
    target: str


TRANSITIONS = {
    "disable": Transition(("enabled",), "disabled"),
    "enable": Transition(("disabled",), "enabled"),
}


def encode_events(events: Iterable[str]) -> str:
    return "," + ",".join(e for e in EVENT_TYPES if e in set(events)) + ","


def decode_events(stored: str) -> list[str]:
    return [e for e in stored.split(",") if e]


def parse_events(values: Any) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValidationError(_("`events` must be a list of event names, for example "
                                "[\"subscriber.created\"]."), field="events")
    unknown = [v for v in values if v not in EVENT_TYPES]
    if unknown:
        raise ValidationError(_("Unknown event %(value)s: choose among %(value2)s.",
                                value=repr(unknown[0][:60]), value2=', '.join(EVENT_TYPES)), field="events")
    if not values:
        raise ValidationError(_("Choose at least one event to send to this endpoint."), field="events")
    return [e for e in EVENT_TYPES if e in values]


def parse_input(body: Mapping[str, Any]) -> tuple[str, list[str]]:
    """An API body `{"url", "events"}`; any other field is refused (422)."""
    unknown = [k for k in body if k not in FIELDS]
    if unknown:
        raise ValidationError(_("Unknown field %(value)s: an endpoint has %(value2)s.",
                                value=repr(unknown[0][:60]), value2=' and '.join(FIELDS)))
    url = body.get("url")
    if not isinstance(url, str):
        raise ValidationError(_("`url` must be a string: the endpoint's https:// URL."), field="url")
    return url, parse_events(body.get("events"))


def create(session: Session, url: str, events: list[str], *, allow_private: bool) -> WebhookEndpoint:
    """Check and save a new endpoint with a new secret. Commits."""
    target_url = url.strip()
    resolve(target_url, allow_private=allow_private)  # raises with the reason
    events = parse_events(events)
    count = session.scalar(select(func.count()).select_from(WebhookEndpoint)) or 0
    if count >= MAX_ENDPOINTS:
        raise ValidationError(_("At most %(max_endpoints)s endpoints; delete one first.",
                                max_endpoints=MAX_ENDPOINTS))
    endpoint = WebhookEndpoint(url=target_url, events=encode_events(events), secret=new_secret(),
                               status="enabled", created_at=utcnow())
    session.add(endpoint)
    session.commit()
    return endpoint


def all_endpoints(session: Session) -> list[WebhookEndpoint]:
    return list(session.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.id)))


def get(session: Session, endpoint_id: int) -> WebhookEndpoint:
    endpoint = session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None:
        raise NotFound(_("There is no webhook endpoint %(endpoint_id)s.", endpoint_id=endpoint_id))
    return endpoint


def remove(session: Session, endpoint_id: int) -> None:
    """Delete an endpoint and its outbox (its log). Commits."""
    get(session, endpoint_id)
    session.execute(delete(WebhookMessage).where(WebhookMessage.endpoint_id == endpoint_id))
    session.execute(delete(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id))
    session.commit()


def move(session: Session, endpoint_id: int, name: str, *, reason: str | None = None,
         now: datetime | None = None) -> bool:
    """Carry out transition `name` if the endpoint is in one of its sources. Does not commit."""
    transition = TRANSITIONS[name]
    values: dict[str, Any] = {"status": transition.target}
    if name == "disable":
        values["disabled_reason"] = (reason or "")[:2000]
    else:
        values.update(disabled_reason=None, failing_since=None)
    return rowcount(session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.status.in_(transition.sources))
        .values(**values)
        .execution_options(synchronize_session=False)
    )) == 1


def enable(session: Session, endpoint_id: int) -> bool:
    """The owner turns a disabled endpoint back on; its waiting events go out again. Commits."""
    get(session, endpoint_id)
    moved = move(session, endpoint_id, "enable")
    session.commit()
    return moved


def disabled_notices(session: Session) -> list[WebhookEndpoint]:
    """The endpoints the worker disabled, for the pages' notices."""
    return list(session.scalars(
        select(WebhookEndpoint).where(WebhookEndpoint.status == "disabled")
        .order_by(WebhookEndpoint.id)))


def as_output(endpoint: WebhookEndpoint, *, with_secret: bool = False) -> dict[str, Any]:
    """An endpoint for the API; the secret only when it was just made."""
    out: dict[str, Any] = {
        "id": endpoint.id,
        "url": endpoint.url,
        "events": decode_events(endpoint.events),
        "status": endpoint.status,
        "disabled_reason": endpoint.disabled_reason,
        "created_at": endpoint.created_at.isoformat() + "Z",
    }
    if with_secret:
        out["secret"] = endpoint.secret
    return out


def send_test(session: Session, endpoint_id: int) -> str:
    """Queue a `webhook.test` event for this endpoint alone (whatever events it wants);
    returns its event id. Commits; the caller asks the worker to deliver it."""
    endpoint = get(session, endpoint_id)
    if endpoint.status != "enabled":
        raise Conflict(_("This endpoint is disabled: enable it first, then send a test event."))
    event_id = emitter.emit_for(session, endpoint_id, TEST_EVENT, {
        "message": "A test event from Broadside. If your endpoint verified this request's "
                   "Broadside-Signature, it is ready.",
        "endpoint_id": endpoint_id,
    })
    session.commit()
    return event_id
