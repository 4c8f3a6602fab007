"""Settings -> Audit log: who changed what, when and from where, newest first, with filters
(person, action, object, days in the owner's zone) and keyset paging. Owners and admins only
(`manage`): the log shows the networks people work from."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from flask import Blueprint, render_template, request

from broadside.core import audit, roles
from broadside.core.i18n import _
from webapp.audit import hook, words
from webapp.extensions import db
from webapp.permissions import allow, defaults
from webapp.templating import owner_zone

bp = Blueprint("audit", __name__, url_prefix="/settings/audit")
defaults(bp, read=roles.MANAGE, change=roles.MANAGE)
bp.record_once(lambda state: hook.install(state.app))

PAGE_SIZE = 50
# Each object's page, where it still exists: (endpoint, its id argument).
OBJECT_PAGES = {
    "broadcast": ("broadcasts.show", "broadcast_id"), "list": ("lists.show", "list_id"),
    "subscriber": ("subscribers.show", "subscriber_id"),
    "segment": ("segments.edit", "segment_id"), "automation": ("automations.edit", "automation_id"),
    "identity": ("identities.edit", "identity_id"), "template": ("transactional.show", "template_id"),
    "webhook": ("settings.webhook_page", "endpoint_id"),
    "bulk": ("subscribers.bulk_status", "bulk_id"), "import": ("subscribers.import_status", "import_id"),
}


def _day(raw: str, errors: dict[str, str], name: str) -> date | None:
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        errors[name] = _("A day as YYYY-MM-DD.")
        return None


def _utc(day: date) -> datetime:
    """The owner's local midnight of `day`, as the stored naive UTC."""
    return datetime.combine(day, time(), tzinfo=owner_zone()).astimezone(UTC).replace(tzinfo=None)


def parse_filters(args: Any) -> tuple[audit.Filters, dict[str, str]]:
    """The page's query string as filters, and a message per field it could not read."""
    errors: dict[str, str] = {}
    person = (args.get("person") or "").strip()
    person_id = None
    if person:
        if person.isdigit() and len(person) < 10:
            person_id = int(person)
        else:
            errors["person"] = _("Choose a person from the list.")
    since = _day((args.get("since") or "").strip(), errors, "since")
    until = _day((args.get("until") or "").strip(), errors, "until")
    if since and until and until < since:
        errors["until"] = _("The last day comes on or after the first.")
    filters = audit.Filters(
        person_id=person_id, action=(args.get("action") or "").strip()[:64],
        object_type=(args.get("type") or "").strip()[:32],
        object_id=(args.get("object") or "").strip()[:64],
        since=_utc(since) if since else None,
        until=_utc(until + timedelta(days=1)) if until and "until" not in errors else None)
    return filters, errors


def _cursor(name: str) -> int | None:
    raw = request.args.get(name, "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


@bp.route("/")
@allow(read=roles.MANAGE)
def index():
    filters, errors = parse_filters(request.args)
    page = audit.entries(db.session, filters, before=_cursor("before"), after=_cursor("after"),
                         limit=PAGE_SIZE)
    kept = {k: v for k, v in request.args.items() if k not in ("before", "after") and v}
    return render_template(
        "audit/index.html", page=page, errors=errors, args=kept,
        people=audit.people(db.session), still_there=audit.still_there(db.session, page.entries),
        object_pages=OBJECT_PAGES, summary_shown=words.summary_shown,
        object_word=words.object_word), 422 if errors else 200
