"""What the pages and the API show of a feed automation: its feed's last poll, its error,
the items waiting for the digest, and the newest items sent with their broadcasts."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from broadside.campaigns.feeds.trigger import feed_of
from broadside.core.errors import shown
from broadside.core.models import Broadcast, Feed, FeedItem

SHOWN_SENT = 20


@dataclass(frozen=True)
class SentItem:
    title: str
    link: str
    published_at: datetime | None
    broadcast_id: int
    broadcast_status: str


@dataclass
class FeedStatus:
    feed: Feed
    waiting: int = 0  # recorded, not sent yet: the next digest's
    sent_count: int = 0  # items carried by a broadcast
    sent: list[SentItem] = field(default_factory=list)  # the newest, at most SHOWN_SENT


def feed_status(session: Session, automation_id: int) -> FeedStatus | None:
    feed = feed_of(session, automation_id)
    if feed is None:
        return None
    counts: dict[bool, int] = {sent: int(n) for sent, n in session.execute(
        select(FeedItem.broadcast_id.is_not(None), func.count())
        .where(FeedItem.feed_id == feed.id, FeedItem.baseline.is_(False))
        .group_by(FeedItem.broadcast_id.is_not(None)))}
    rows = session.execute(
        select(FeedItem.title, FeedItem.link, FeedItem.published_at, FeedItem.broadcast_id,
               Broadcast.status)
        .join(Broadcast, Broadcast.id == FeedItem.broadcast_id)
        .where(FeedItem.feed_id == feed.id)
        .order_by(FeedItem.id.desc()).limit(SHOWN_SENT)).all()
    return FeedStatus(feed=feed, waiting=int(counts.get(False, 0)),
                      sent_count=int(counts.get(True, 0)),
                      sent=[SentItem(title or link, link, published, int(broadcast_id or 0), status)
                            for title, link, published, broadcast_id, status in rows])


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat() + "Z"  # as the whole API writes them


def status_json(status: FeedStatus | None) -> dict[str, Any] | None:
    """The API's "feed" of an automation (null unless its trigger is a feed)."""
    if status is None:
        return None
    feed = status.feed
    return {"polled_at": _iso(feed.polled_at), "next_poll_at": _iso(feed.next_poll_at),
            "next_digest_at": _iso(feed.next_digest_at), "error": shown(feed.error),
            "error_at": _iso(feed.error_at), "waiting": status.waiting,
            "sent_count": status.sent_count,
            "sent": [{"title": item.title, "link": item.link,
                      "published_at": _iso(item.published_at),
                      "broadcast_id": item.broadcast_id} for item in status.sent]}
