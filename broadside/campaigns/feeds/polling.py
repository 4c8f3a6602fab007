"""A feed automation's work: poll its feed, record the new items, send them (`run`, the
worker's job), and which feeds are due (`due_feeds`, what each stream's maintenance queues).

Each item once, across crashes and concurrent polls:

1. `feed_items` holds UNIQUE(feed_id, key): an item is recorded once ever (INSERT ... ON
   CONFLICT DO NOTHING), keyed by its id or link (`broadside.campaigns.feeds.items`).
2. An item is sent only by the transaction that moves its `broadcast_id` from NULL to the
   broadcast carrying it (a guarded UPDATE: `broadcast_id IS NULL AND NOT baseline`, every
   item or none) and that creates and sends that broadcast: `send_broadcast`'s one commit
   holds the item's row, the guarded UPDATE, the broadcast, its frozen revision and its
   audience. A crash before it leaves the item unsent and no broadcast; after it, the item
   carried and its broadcast queued, whose pipeline then sends each copy once (pacing, the
   send-time re-check, the unsubscribe link, nothing twice). One per item ("each") writes
   the item and sends it in that one transaction.
3. Every transaction that writes a feed's items begins by touching the feed's row (an
   UPDATE guarded by its URL, its first statement: reads end with a commit before it, and
   the functions below pass ids and plain values, never an expired ORM object whose reload
   would come first): a row lock on PostgreSQL, the write lock on SQLite (a read transaction
   turned writer after another commit fails there at once). Two polls of one feed take
   turns, the second finding what the first recorded; a poll whose URL the owner changed
   meanwhile writes nothing.
4. The first successful poll records the items present as `baseline` (seen, never sent): a
   feed of 50 old posts sends nothing when enabled. So does a record-only automation's
   every item.

A failure (network, HTTP status, not a feed, too big, too slow, a send refused) is kept on
the feed in the owner's words (`error`) and nothing is sent; the next good poll clears it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import lifecycle
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.campaigns.feeds.content import ItemText, compose
from broadside.campaigns.feeds.fetch import FeedProblem, Fetched, fetch
from broadside.campaigns.feeds.items import Item, parse_feed
from broadside.campaigns.feeds.schedule import DIGEST_RETRY, POLL_EVERY, next_digest
from broadside.core.db import dialect_insert, rowcount
from broadside.core.errors import DomainError
from broadside.core.models import Automation, AutomationStep, Broadcast, Feed, FeedItem
from broadside.core.models.automations import AutomationStatus
from broadside.core.site_settings import owner_zone
from broadside.core.timeutil import utcnow
from broadside.delivery.queues import Jobs
from broadside.mail.body_formats import written_as

log = logging.getLogger("broadside.feeds")

ENABLED = AutomationStatus.ENABLED.value
MAX_NEW_PER_POLL = 10  # one email each; any more wait for the next poll
MAX_ERROR = 1000

Fetcher = Callable[..., Fetched]


@dataclass(frozen=True)
class Target:
    """What a feed automation's poll needs of it, read once (plain values: see invariant 3)."""

    automation_id: int
    feed_id: int
    url: str
    mode: str
    list_id: int | None
    segment_id: int | None
    identity_id: int | None
    record_only: bool


@dataclass
class Outcome:
    polled: bool = False
    new: int = 0
    broadcasts: int = 0
    error: str | None = None


def due_feeds(session: Session, identity_id: int | None, now: datetime | None = None) -> list[int]:
    """Feeds of enabled feed automations of this identity whose poll or digest is due."""
    now = now or utcnow()
    identity = (Automation.identity_id.is_(None) if identity_id is None
                else Automation.identity_id == identity_id)
    return list(session.scalars(
        select(Feed.id).join(Automation, Automation.id == Feed.automation_id)
        .where(Automation.trigger_type == "feed", Automation.status == ENABLED, identity,
               or_(Feed.next_poll_at.is_(None), Feed.next_poll_at <= now,
                   and_(Feed.mode == "digest", Feed.next_digest_at <= now)))
        .order_by(Feed.id)))


def run(session: Session, feed_id: int, *, default_from: str, jobs: Jobs | None,
        allow_private: bool, now: datetime | None = None, fetcher: Fetcher = fetch) -> Outcome:
    """Poll the feed when its poll is due, then send its digest when that is due."""
    now = now or utcnow()
    outcome = Outcome()
    feed = session.get(Feed, feed_id)
    automation = session.get(Automation, feed.automation_id) if feed else None
    if feed is None or automation is None or automation.trigger_type != "feed" or \
            automation.status != ENABLED:
        session.rollback()
        return outcome
    target = Target(automation.id, feed.id, feed.url, feed.mode, automation.list_id,
                    automation.segment_id, automation.identity_id, automation.record_only)
    if feed.next_poll_at is None or feed.next_poll_at <= now:
        outcome = _poll(session, target, primed=feed.primed_at is not None,
                        validators=(feed.etag, feed.last_modified), default_from=default_from,
                        jobs=jobs, allow_private=allow_private, now=now, fetcher=fetcher)
    session.expire_all()
    feed = session.get(Feed, feed_id)
    if feed is not None and feed.mode == "digest" and feed.next_digest_at is not None \
            and feed.next_digest_at <= now:
        upcoming = next_digest(feed, owner_zone(session), now)
        outcome.broadcasts += _send_digest(session, target, feed.next_digest_at, upcoming,
                                           default_from=default_from, jobs=jobs, now=now)
    session.commit()
    return outcome


# ------------------------------------------------------------------ polling


def _poll(session: Session, target: Target, *, primed: bool,
          validators: tuple[str | None, str | None], default_from: str, jobs: Jobs | None,
          allow_private: bool, now: datetime, fetcher: Fetcher) -> Outcome:
    feed_id, url = target.feed_id, target.url
    etag, modified = validators if primed else (None, None)
    session.commit()  # no transaction stays open across the network
    outcome = Outcome(polled=True)
    try:
        fetched = fetcher(url, etag=etag, last_modified=modified, allow_private=allow_private)
        items = [] if fetched.status == 304 else parse_feed(fetched.body)
    except FeedProblem as problem:
        outcome.error = _failed(session, feed_id, url, problem.message, now)
        return outcome
    if fetched.status == 304:
        _succeeded(session, feed_id, url, fetched, now)
        return outcome
    if not primed:
        _prime(session, feed_id, url, items, fetched, now)
        return outcome
    known = set(session.scalars(select(FeedItem.key).where(
        FeedItem.feed_id == feed_id, FeedItem.key.in_([i.key for i in items]))))
    session.commit()  # (a read; the writes below each begin with the feed's row)
    new = _oldest_first([i for i in items if i.key not in known])
    outcome.new = len(new)
    try:
        for item in new[:MAX_NEW_PER_POLL]:
            outcome.broadcasts += _record(session, target, item, default_from=default_from,
                                          jobs=jobs)
        if target.mode == "each" and not target.record_only:
            leftovers = _unsent(session, feed_id)  # left by a digest, or a refused send
            session.commit()
            for item_id in leftovers:
                if _lock(session, feed_id, url):
                    outcome.broadcasts += _send(session, target, [item_id],
                                                default_from=default_from, jobs=jobs)
                else:
                    session.rollback()
    except FeedProblem as problem:
        outcome.error = _failed(session, feed_id, url, problem.message, now)
        return outcome
    # Validators kept only when every new item was taken: else the next poll reads it whole.
    _succeeded(session, feed_id, url, fetched if len(new) <= MAX_NEW_PER_POLL else None, now)
    return outcome


def _oldest_first(items: list[Item]) -> list[Item]:
    """Feeds list their newest first; by date when every item has one."""
    if items and all(i.published_at is not None for i in items):
        return sorted(items, key=lambda i: i.published_at)  # type: ignore[arg-type,return-value]
    return list(reversed(items))


def _lock(session: Session, feed_id: int, url: str) -> bool:
    """Take the feed's row (invariant 3); False when its URL changed meanwhile."""
    return rowcount(session.execute(update(Feed).where(Feed.id == feed_id, Feed.url == url)
                                    .values(url=Feed.url))) == 1


def _insert(session: Session, feed_id: int, item: Item, *, baseline: bool) -> None:
    statement = dialect_insert(session, FeedItem.__table__).values(
        feed_id=feed_id, key=item.key, title=item.title, link=item.link,
        summary_html=item.summary_html, published_at=item.published_at, seen_at=utcnow(),
        baseline=baseline)
    session.execute(statement.on_conflict_do_nothing(index_elements=["feed_id", "key"]))


def _prime(session: Session, feed_id: int, url: str, items: Sequence[Item], fetched: Fetched,
           now: datetime) -> None:
    """The first good poll: what the feed holds now is recorded, never sent (invariant 4)."""
    if not _lock(session, feed_id, url):
        session.rollback()
        return
    for item in items:
        _insert(session, feed_id, item, baseline=True)
    session.execute(update(Feed).where(Feed.id == feed_id, Feed.primed_at.is_(None))
                    .values(primed_at=now))
    _succeeded(session, feed_id, url, fetched, now)


def _record(session: Session, target: Target, item: Item, *, default_from: str,
            jobs: Jobs | None) -> int:
    """A new item recorded and, one per item, sent in the same transaction (invariant 2)."""
    if not _lock(session, target.feed_id, target.url):
        session.rollback()
        return 0
    _insert(session, target.feed_id, item, baseline=target.record_only)
    if target.mode != "each" or target.record_only:
        session.commit()
        return 0
    item_id = session.scalar(select(FeedItem.id).where(
        FeedItem.feed_id == target.feed_id, FeedItem.key == item.key,
        FeedItem.broadcast_id.is_(None), FeedItem.baseline.is_(False)))
    if item_id is None:
        session.commit()
        return 0
    return _send(session, target, [item_id], default_from=default_from, jobs=jobs)


def _unsent(session: Session, feed_id: int) -> list[int]:
    return list(session.scalars(
        select(FeedItem.id).where(FeedItem.feed_id == feed_id, FeedItem.broadcast_id.is_(None),
                                  FeedItem.baseline.is_(False))
        .order_by(FeedItem.published_at, FeedItem.id)))


def _succeeded(session: Session, feed_id: int, url: str, fetched: Fetched | None,
               now: datetime) -> None:
    values: dict[str, object] = {"error": None, "error_at": None, "polled_at": now,
                                 "next_poll_at": now + POLL_EVERY}
    if fetched is None:
        values.update(etag=None, last_modified=None)
    elif fetched.status != 304:
        etag, modified = fetched.etag, fetched.last_modified
        values.update(etag=etag if etag and len(etag) <= 255 else None,
                      last_modified=modified if modified and len(modified) <= 64 else None)
    session.execute(update(Feed).where(Feed.id == feed_id, Feed.url == url).values(**values))
    session.commit()


def _failed(session: Session, feed_id: int, url: str, message: str, now: datetime) -> str:
    session.rollback()
    session.execute(update(Feed).where(Feed.id == feed_id, Feed.url == url).values(
        error=message[:MAX_ERROR], error_at=now, polled_at=now, next_poll_at=now + POLL_EVERY))
    session.commit()
    log.info("feed %s: %s", feed_id, message)
    return message


# ------------------------------------------------------------------ sending


def _send(session: Session, target: Target, item_ids: list[int], *, default_from: str,
          jobs: Jobs | None) -> int:
    """One broadcast carrying `item_ids` to the automation's list or segment, through its
    identity, created and sent in the caller's transaction with the guarded UPDATE of the
    items (invariant 2). Returns 1 when sent, 0 when another poll had taken them."""
    step = session.scalar(select(AutomationStep).where(
        AutomationStep.automation_id == target.automation_id,
        AutomationStep.removed_at.is_(None))
        .order_by(AutomationStep.position).limit(1))
    if step is None:
        session.rollback()
        raise FeedProblem("New items were found but not sent: the automation has no step to "
                          "say what its emails say. Add one.")
    items = list(session.scalars(select(FeedItem).where(FeedItem.id.in_(item_ids))
                                 .order_by(FeedItem.published_at, FeedItem.id)))
    composed = compose(subject=step.subject, preheader=step.preheader, body=step.body,
                       body_format=step.body_format,
                       items=[ItemText(i.title, i.link, i.summary_html, i.published_at)
                              for i in items])
    broadcast = Broadcast(list_id=target.list_id, segment_id=target.segment_id,
                          subject=composed.subject, preheader=composed.preheader,
                          body=written_as(composed.body, "html"), body_format="html",
                          editor="html", skip_if_received_within_hours=None,
                          status=lifecycle.INITIAL.value, identity_id=target.identity_id)
    session.add(broadcast)
    session.flush()
    moved = rowcount(session.execute(
        update(FeedItem).where(FeedItem.id.in_(item_ids), FeedItem.broadcast_id.is_(None),
                               FeedItem.baseline.is_(False))
        .values(broadcast_id=broadcast.id).execution_options(synchronize_session=False)))
    if moved != len(item_ids):
        session.rollback()  # another poll carried them: neither the broadcast nor a move
        return 0
    try:
        send_broadcast(session, broadcast.id, default_from=default_from, jobs=jobs)
    except DomainError as exc:
        session.rollback()
        raise FeedProblem(f"New items were found but not sent: {exc.message}") from None
    log.info("feed automation %s: broadcast %s carries %d item(s)", target.automation_id,
             broadcast.id, len(item_ids))
    return 1


def _send_digest(session: Session, target: Target, seen: datetime, upcoming: datetime, *,
                 default_from: str, jobs: Jobs | None, now: datetime) -> int:
    """The digest's time: its schedule moved on by one guarded UPDATE (of two runs, one
    sends; the transaction's first statement), and the collected items sent in the same
    transaction."""
    session.commit()
    if not rowcount(session.execute(update(Feed).where(
            Feed.id == target.feed_id, Feed.mode == "digest", Feed.next_digest_at == seen)
            .values(next_digest_at=upcoming))):
        session.rollback()
        return 0
    item_ids = [] if target.record_only else _unsent(session, target.feed_id)
    if not item_ids:
        session.commit()
        return 0
    try:
        return _send(session, target, item_ids, default_from=default_from, jobs=jobs)
    except FeedProblem as problem:
        session.execute(update(Feed).where(Feed.id == target.feed_id).values(
            error=problem.message[:MAX_ERROR], error_at=now,
            next_digest_at=now + DIGEST_RETRY))
        session.commit()
        return 0
