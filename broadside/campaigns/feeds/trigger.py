"""A feed automation's trigger: read from the API's JSON (and the editor's form, turned into
it), saved as the automation's `Feed` row, and shown back.

    {"type": "feed", "url": "https://example.com/feed.xml", "list_id": N (or "segment_id"),
     "mode": "each" | "digest", "every": "daily" | "weekly", "at": "HH:MM", "weekday": 0-6}

`mode` "each" (the default) sends one email per new item; "digest" collects them and sends
one email at `at` (the owner's time zone, Settings) every day, or every week on `weekday`
(0 = Monday, the default). `every`, `at` and `weekday` belong to a digest only. Every mistake
is a ValidationError naming its field (`trigger.url`, `trigger.at`...).

Saving with another URL starts that feed afresh: its validators and its first poll are
forgotten, so the items it holds at its first poll are recorded and not sent (the items of
the old URL stay recorded: one the new feed shares is still never sent twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts.local_time import clean_local_time
from broadside.campaigns.feeds.schedule import next_digest
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.core.models import Automation, Feed, MailingList, Segment
from broadside.core.models.automations import FEED_EVERY, FEED_MODES
from broadside.core.site_settings import owner_zone
from broadside.core.timeutil import utcnow
from broadside.segments.rules import MAX_ID

MAX_URL = 2000
KEYS = ("type", "url", "list_id", "segment_id", "mode", "every", "at", "weekday")
SHAPE = ('{"type": "feed", "url": "https://…", "list_id": N (or "segment_id": N), '
         '"mode": "each" | "digest", "every": "daily" | "weekly", "at": "HH:MM", "weekday": 0-6}')


@dataclass
class FeedTrigger:
    url: str
    mode: str = "each"
    every: str | None = None
    at: str | None = None
    weekday: int | None = None


def _field(name: str) -> str:
    return f"trigger.{name}"


def check_feed_url(value: Any) -> str:
    """The feed's address: http(s), a host, no user name or password, no spaces. Where it
    points is judged at each poll (public addresses only)."""
    url = value.strip() if isinstance(value, str) else ""
    if not url:
        raise ValidationError(_("Give the feed's address (its url), starting with https://."),
                              field=_field("url"))
    if len(url) > MAX_URL:
        raise ValidationError(_("The feed's url is too long (at most %(n)s characters).", n=MAX_URL),
                              field=_field("url"))
    try:
        parts = urlsplit(url)  # raises ValueError on a bracket that opens no IPv6 address
    except ValueError:
        parts = urlsplit("")
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValidationError(_("The feed's url must start with https:// (or http://) and "
                                "name a host."), field=_field("url"))
    if parts.username is not None or parts.password is not None:
        raise ValidationError(_("Put no user name or password in the feed's url."),
                              field=_field("url"))
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValidationError(_("The feed's url has a port that is not a number from 1 to 65535."),
                              field=_field("url")) from None
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValidationError(_("The feed's url may not contain spaces or control characters."),
                              field=_field("url"))
    return url


def parse_trigger(trigger: dict[str, Any]) -> FeedTrigger:
    """The feed trigger's own fields (its list or segment is read with the others')."""
    unknown = sorted(set(trigger) - set(KEYS))
    if unknown:
        raise ValidationError(f'A "feed" trigger has no field {unknown[0]}; it is {SHAPE}.',
                              field=_field(unknown[0]))
    result = FeedTrigger(url=check_feed_url(trigger.get("url")))
    mode = trigger.get("mode", "each")
    if mode not in FEED_MODES:
        raise ValidationError('The trigger\'s mode must be "each" (one email per new item) or '
                              '"digest" (the new items together, on a schedule).',
                              field=_field("mode"))
    result.mode = mode
    if mode == "each":
        for key in ("every", "at", "weekday"):
            if trigger.get(key) is not None:
                raise ValidationError(f'{key} belongs to a digest: give "mode": "digest", or '
                                      f"leave {key} out.", field=_field(key))
        return result
    every = trigger.get("every", "daily")
    if every not in FEED_EVERY:
        raise ValidationError('The digest\'s every must be "daily" or "weekly".',
                              field=_field("every"))
    result.every = every
    result.at = clean_local_time(trigger.get("at"), field=_field("at"))
    if result.at is None:
        raise ValidationError(_('Give the digest\'s time as "at": "HH:MM" (your time zone, '
                                "from Settings)."), field=_field("at"))
    weekday = trigger.get("weekday")
    if every == "daily":
        if weekday is not None:
            raise ValidationError('A daily digest has no weekday: leave it out, or give '
                                  '"every": "weekly".', field=_field("weekday"))
    else:
        weekday = 0 if weekday is None else weekday
        if isinstance(weekday, bool) or not isinstance(weekday, int) or not 0 <= weekday <= 6:
            raise ValidationError("The digest's weekday must be a whole number from 0 (Monday) "
                                  "to 6 (Sunday).", field=_field("weekday"))
        result.weekday = weekday
    return result


def audience_ids(trigger: dict[str, Any]) -> tuple[int | None, int | None]:
    """(list_id, segment_id): whom the items go to, exactly one of them."""
    ids = []
    for key in ("list_id", "segment_id"):
        value = trigger.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 1 <= value <= MAX_ID):
            raise ValidationError(f"The trigger's {key} must be an id (a number from 1 to "
                                  f"{MAX_ID}).", field=_field(key))
        ids.append(value)
    if (ids[0] is None) == (ids[1] is None):
        raise ValidationError(_("A feed's items go to a list or a segment: give the trigger's "
                                "list_id or its segment_id (one of them)."), field=_field("list_id"))
    return ids[0], ids[1]


def check_audience(session: Session, list_id: int | None, segment_id: int | None,
                   steps: int) -> None:
    """The list or segment exists; at most one step (what each email says)."""
    if list_id is not None and session.get(MailingList, list_id) is None:
        raise ValidationError(_("There is no list with id %(id)s.", id=list_id), field=_field("list_id"))
    if segment_id is not None and session.get(Segment, segment_id) is None:
        raise ValidationError(_("There is no segment with id %(id)s.", id=segment_id),
                              field=_field("segment_id"))
    if steps > 1:
        raise ValidationError(_("A feed automation has one step: what each email says, "
                                "around the new items ([[items]]). Remove the others."),
                              field="steps")


def shown(session: Session, automation: Automation) -> dict[str, Any]:
    """The whole trigger as the API shows it back."""
    return {"type": "feed", **trigger_json(feed_of(session, automation.id)),
            "list_id": automation.list_id, "segment_id": automation.segment_id}


def feed_of(session: Session, automation_id: int) -> Feed | None:
    return session.scalar(select(Feed).where(Feed.automation_id == automation_id))


def save_feed(session: Session, automation_id: int, trigger: FeedTrigger,
              now: datetime | None = None) -> Feed:
    """The automation's Feed row as `trigger` says (in the caller's transaction)."""
    now = now or utcnow()
    feed = feed_of(session, automation_id)
    if feed is None:
        feed = Feed(automation_id=automation_id, url=trigger.url)
        session.add(feed)
    elif feed.url != trigger.url:
        feed.url = trigger.url
        feed.etag = feed.last_modified = None
        feed.primed_at = feed.polled_at = feed.next_poll_at = None
        feed.error = feed.error_at = None
    schedule = (trigger.every, trigger.at, trigger.weekday)
    changed = (feed.mode, feed.every, feed.at, feed.weekday) != (trigger.mode, *schedule)
    feed.mode, feed.every, feed.at, feed.weekday = trigger.mode, *schedule
    if trigger.mode != "digest":
        feed.next_digest_at = None
    elif changed or feed.next_digest_at is None:
        feed.next_digest_at = next_digest(feed, owner_zone(session), now)
    session.flush()
    return feed


def trigger_json(feed: Feed | None) -> dict[str, Any]:
    """The trigger's feed fields as the API shows them back (and `parse_trigger` reads)."""
    if feed is None:
        return {"url": None, "mode": "each"}
    shown: dict[str, Any] = {"url": feed.url, "mode": feed.mode}
    if feed.mode == "digest":
        shown.update(every=feed.every, at=feed.at)
        if feed.every == "weekly":
            shown["weekday"] = feed.weekday
    return shown
