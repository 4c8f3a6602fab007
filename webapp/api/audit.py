"""`GET /api/audit`: the audit log for owners' and admins' tokens (`manage`), newest first,
with the page's filters and the API's keyset paging (`after`: the previous page's `next`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import jsonify, request

from broadside.core import audit, roles
from broadside.core.errors import ValidationError
from broadside.core.models import AuditEntry
from webapp.api import bp
from webapp.api.inputs import iso, page_args, query_id, takes_query
from webapp.extensions import db
from webapp.permissions import allow

DEFAULT_PAGE = 50
MAX_PAGE = 200


def _moment(name: str) -> datetime | None:
    raw = request.args.get(name)
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):  # not a moment, or one beyond year 1 or 9999 in UTC
        raise ValidationError(f"'{name}' must be a date and time in ISO 8601, e.g. "
                              "2026-12-01T09:30:00Z.", field=name) from None
    return moment


def _text(name: str, longest: int) -> str:
    value = (request.args.get(name) or "").strip()
    if len(value) > longest:
        raise ValidationError(f"'{name}' is at most {longest} characters.", field=name)
    return value


def entry_json(entry: AuditEntry) -> dict[str, Any]:
    return {"id": entry.id, "created_at": iso(entry.created_at),
            "actor": {"person_id": entry.actor_person_id, "token_id": entry.actor_token_id,
                      "label": entry.actor},
            "address": entry.address, "action": entry.action,
            "object_type": entry.object_type or None, "object_id": entry.object_id,
            "summary": entry.summary, "details": entry.details}


@bp.route("/audit", methods=["GET"])
@allow(roles.MANAGE)
@takes_query("person_id", "action", "object_type", "object_id", "since", "until", "after",
             "limit")
def api_audit():
    after, limit = page_args(default_limit=DEFAULT_PAGE, max_limit=MAX_PAGE)
    filters = audit.Filters(
        person_id=query_id("person_id"), action=_text("action", 64),
        object_type=_text("object_type", 32), object_id=_text("object_id", 64),
        since=_moment("since"), until=_moment("until"))
    page = audit.entries(db.session, filters, before=after, limit=limit)
    return jsonify(items=[entry_json(e) for e in page.entries], next=page.older)
