"""A broadcast sent at each reader's own hour, over the API: "send_at_local" on POST and PATCH
/api/broadcasts ("09:00": each reader gets it at 09:00 in their time zone, within 24 hours of
the press, readers without one at the owner's; null: everyone at once), shown on GET and in
the lists. A time not written HH:MM (00:00 to 23:59) is 422 naming the field, before anything
is written. The write is `broadside.campaigns.broadcasts.local_plan.choose` (drafts only).
Together with an A/B test the send is refused at the press (an A/B test sends at one time).
"""

from __future__ import annotations

from typing import Any

from broadside.campaigns.broadcasts import local_plan
from broadside.campaigns.broadcasts.local_time import clean_local_time
from broadside.core.errors import ValidationError
from broadside.core.models import Broadcast
from webapp.extensions import db

FIELD = "send_at_local"
KEEP: Any = ...  # not in the body: left as it is


def send_at_local_field(data: dict[str, Any]) -> Any:
    """The body's "send_at_local" as it will be stored ("HH:MM" or None), KEEP when absent."""
    if FIELD not in data:
        return KEEP
    value = data[FIELD]
    try:
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise ValidationError("")  # "" is not "at once": that is null
        return clean_local_time(value)
    except ValidationError:
        raise ValidationError("'send_at_local' must be a time of day written HH:MM, from 00:00 "
                              "to 23:59 (each reader gets it then in their time zone), or null "
                              "for everyone at once.", field=FIELD) from None


def save_send_at_local(broadcast_id: int, value: Any) -> None:
    """Store a value `send_at_local_field` checked (nothing for KEEP)."""
    if value is not KEEP:
        local_plan.choose(db.session, broadcast_id, value)


def send_at_local_json(broadcast: Broadcast) -> dict[str, Any]:
    return {FIELD: broadcast.send_at_local}
