"""Invariant 3, ask again at send time: the last read before each person's send, and their
message built from exactly the values that read returned.

A claimed row is sent only if, at its turn, the broadcast is still `sending` and the person
is still on the list, subscribed and unsuppressed; otherwise the slice stops (the owner
paused or cancelled) or skips the row with the reason. It runs for every recipient, so the
query is one indexed statement compiled once per dialect, and the message is rendered from
the revision compiled once per slice (invariant 8: the revision never changes).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from email.utils import formataddr
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, func, select
from sqlalchemy.orm import Session

from broadside.campaigns.analytics.rewrite import Tracker
from broadside.campaigns.archive.links import ViewLinks
from broadside.campaigns.codes.fields import FIELD as CODE_FIELD
from broadside.core.models import Broadcast, Delivery, Revision, Subscriber, Subscription
from broadside.core.models.automations import AutomationRevision
from broadside.core.models.sending import MAY_HAVE_RECEIVED, BroadcastStatus
from broadside.core.timeutil import utcnow
from broadside.delivery.transports import MessageFields
from broadside.mail.attachment_use import parts_of
from broadside.mail.message_refs import delivery_message_id
from broadside.mail.mime import MailAttachment, check_message
from broadside.mail.rendering import MergeError, compiled_revision, message_bytes
from broadside.mail.unsubscribe_tokens import Tokens, unsubscribe_url
from jobs.classify import unwritable
from jobs.languages import ReaderLanguages, RevisionMessages
from jobs.rows import Decision, Prepared, Row
from jobs.runtime import Runtime

SENDING = BroadcastStatus.SENDING.value


_RECIPIENT_STATE = (
    select(
        Broadcast.status,
        Subscriber.email,
        Subscriber.name,
        Subscriber.attributes,
        Subscriber.suppression,
        Subscription.status,
        Subscriber.soft_bounce_count,
        Subscriber.created_at,
        Broadcast.tracking,
        Subscriber.locale,
    )
    .select_from(Broadcast)
    .outerjoin(Subscriber, Subscriber.id == bindparam("subscriber_id"))
    .outerjoin(
        Subscription,
        and_(Subscription.subscriber_id == Subscriber.id, Subscription.list_id == bindparam("list_id")),
    )
    .where(Broadcast.id == bindparam("broadcast_id"))
)


class RecipientState(NamedTuple):
    broadcast_status: str
    email: str | None  # None: the subscriber was erased
    name: str | None
    attributes: dict | None
    suppression: str | None
    subscription: str | None  # None: no longer on the list
    soft_bounces: int | None
    joined: datetime | str | None  # when their row was created (text from SQLite's cursor)
    tracking: str | None = None  # the broadcast's reader tracking, read again for each person
    locale: str | None = None  # the reader's language (None: their list's, else Settings')


_compiled_state: dict[str, tuple[str, list[str] | None]] = {}


def recipient_state(
    session: Session, broadcast_id: int, list_id: int | None, subscriber_id: int | None
) -> RecipientState:
    """Invariant 3, ask again at send time: one indexed query for the broadcast's state and
    this person's subscription and suppression, read just before their send.

    It runs before every send, so the statement is compiled once per dialect and run on the
    driver's own cursor: SQLAlchemy's per-execution work (result objects, type processing)
    cost more than the query itself (bench/bookkeeping_costs.py: ~80 against ~15 µs on SQLite).
    It runs in the session's transaction, on the session's connection. (`StateReader` is the
    same read for a slice, keeping its cursor.)"""
    return StateReader()(session, broadcast_id, list_id, subscriber_id)


class StateReader:
    """`recipient_state` for one slice: the same statement, in the session's transaction, on
    its connection; on PostgreSQL the driver's cursor is kept from one person to the next
    while the connection is the same one. A new psycopg cursor sets up its row loaders on its
    first result, which cost about as much as the round trip itself (~30 µs a person); a
    kept cursor holds nothing on the server (it is client-side, each result read whole).
    SQLite's cursors are closed after each read, which resets the statement."""

    def __init__(self) -> None:
        self._dbapi: object | None = None  # the connection the kept cursor belongs to
        self._cursor: Any = None

    def __call__(self, session: Session, broadcast_id: int, list_id: int | None,
                 subscriber_id: int | None) -> RecipientState:
        connection = session.connection()
        compiled = _compiled_state.get(connection.dialect.name)
        if compiled is None:
            statement = _RECIPIENT_STATE.compile(dialect=connection.dialect)
            positions = list(statement.positiontup or ()) if statement.positional else None
            compiled = (str(statement), positions)
            _compiled_state[connection.dialect.name] = compiled
        sql, order = compiled
        params = {"broadcast_id": broadcast_id, "list_id": list_id, "subscriber_id": subscriber_id}
        arguments = tuple(params[name] for name in order) if order is not None else params
        if connection.dialect.name == "postgresql":
            dbapi = connection.connection.dbapi_connection
            if dbapi is not self._dbapi or self._cursor.closed:
                self._cursor = dbapi.cursor()  # type: ignore[union-attr]
                self._dbapi = dbapi
            self._cursor.execute(sql, arguments)
            row = self._cursor.fetchone()
        else:
            cursor = connection.connection.cursor()
            try:
                cursor.execute(sql, arguments)
                row = cursor.fetchone()
            finally:
                cursor.close()
        if row is None:
            raise LookupError(f"broadcast {broadcast_id} is gone")
        state = RecipientState(*row)
        if isinstance(state.attributes, str):  # SQLite keeps JSON as text
            state = state._replace(attributes=json.loads(state.attributes))
        return state


# The frequency cap: the latest copy of another broadcast this person got (or may have got:
# `unknown`, or in flight) since a moment. One query on deliveries' subscriber index, made only
# for broadcasts with a cap.
_LAST_RECEIVED = (
    select(Broadcast.subject, func.coalesce(Delivery.sent_at, Delivery.claimed_at).label("at"))
    .select_from(Delivery)
    .join(Broadcast, Broadcast.id == Delivery.broadcast_id)
    .where(
        Delivery.subscriber_id == bindparam("subscriber_id"),
        Delivery.broadcast_id != bindparam("broadcast_id"),
        Delivery.status.in_(MAY_HAVE_RECEIVED),
        func.coalesce(Delivery.sent_at, Delivery.claimed_at) >= bindparam("since"),
    )
    .order_by(func.coalesce(Delivery.sent_at, Delivery.claimed_at).desc())
    .limit(1)
)


def ago(moment: datetime, now: datetime) -> str:
    minutes = max(0, int((now - moment).total_seconds() // 60))
    if minutes < 60:
        return "just now" if minutes < 1 else f"{minutes} minute{'' if minutes == 1 else 's'} ago"
    hours = minutes // 60
    return f"{hours} hour{'' if hours == 1 else 's'} ago"


def recently_received(session: Session, broadcast_id: int, subscriber_id: int, hours: int,
                      now: datetime | None = None) -> str | None:
    """The frequency cap's skip reason ("received 'Issue #4' 3 hours ago"), or None when this
    person got no other broadcast in the last `hours`. Checked at their turn, next to the
    subscription re-check, so a broadcast that finished a minute ago counts."""
    now = now or utcnow()
    row = session.execute(_LAST_RECEIVED, {"subscriber_id": subscriber_id,
                                           "broadcast_id": broadcast_id,
                                           "since": now - timedelta(hours=hours)}).first()
    if row is None:
        return None
    subject = row.subject if len(row.subject) <= 80 else row.subject[:79] + "…"
    return f"received '{subject}' {ago(row.at, now)}"


def skip_reason(email: str | None, suppression: str | None, subscription: str | None) -> str | None:
    if email is None:
        return "subscriber erased"
    if suppression is not None:
        return f"suppressed: {suppression}"
    if subscription is None:
        return "no longer on the list"
    if subscription != "active":
        return subscription  # unsubscribed, or unconfirmed again
    return None


class Recheck:
    """One slice's re-check and message builder: the revision compiled, the sender header
    and the token signer made once per slice; per recipient, one query and one render."""

    view_links: ViewLinks | None = None  # "View in your browser" (broadside.campaigns.archive.links)
    tracker: Tracker | None = None  # reader tracking (broadside.campaigns.analytics); automations: none
    attachments: tuple[MailAttachment, ...] = ()  # the revision's files, read once per slice
    readers: ReaderLanguages | None = None  # each reader's language (jobs/languages.py)
    messages: RevisionMessages | None = None  # the revision's messages by language

    def __init__(
        self, session: Session, runtime: Runtime, broadcast_id: int, list_id: int | None,
        revision: Revision, cap_hours: int | None = None, *, fields: bool = False,
    ) -> None:
        self.session = session
        self.rt = runtime
        self.broadcast_id = broadcast_id
        self.list_id = list_id
        self.cap_hours = cap_hours
        self.read_state = StateReader()  # one per slice: its cursor kept on PostgreSQL
        self.from_email = revision.from_email
        # Compiled once per worker process (the revision never changes), rendered per recipient.
        self.compiled = compiled_revision(revision.subject, revision.html_template, revision.text_template)
        self.attachments = parts_of(session, revision.attachment_ids)
        self.from_header = formataddr((revision.from_name, revision.from_email))
        self.tokens = Tokens(runtime.config["SECRET_KEY"])  # one per slice
        self.base_url = runtime.config["BASE_URL"]
        # A provider taking many messages in one JSON request gets each message's fields.
        self.fields = fields
        self.view_links = ViewLinks.for_broadcast(session, broadcast_id,
                                                  runtime.config["SECRET_KEY"], self.base_url)
        self.tracker = Tracker(session, broadcast_id, revision.html_template,
                               secret_key=runtime.config["SECRET_KEY"], base_url=self.base_url)
        self.use_revision(revision)

    def use_revision(self, revision: Revision | AutomationRevision) -> None:
        """Each reader's message of `revision` (its versions, by language), chosen per person."""
        if self.readers is None:
            self.readers = ReaderLanguages(self.session)
        self.messages = RevisionMessages(revision, self.compiled, self.tracker)

    def decide(self, row: Row) -> Decision:
        """Invariant 3: the send-time re-check of this row, and this person's message built
        from the values it read."""
        list_id = row.list_id if row.list_id is not None else self.list_id
        state = self.read_state(self.session, self.broadcast_id, list_id, row.subscriber_id)
        if state.broadcast_status != SENDING:
            return Decision(stop=state.broadcast_status)
        reason = skip_reason(state.email, state.suppression, state.subscription)
        if reason is None and self.cap_hours and row.subscriber_id is not None:
            reason = recently_received(self.session, self.broadcast_id, row.subscriber_id,
                                       self.cap_hours)
        if reason is not None:
            return Decision(skip=reason)
        assert state.email is not None and state.joined is not None  # skip_reason refused the erased
        decision = self.prepare(row, state.email, state.name or "", state.attributes or {},
                                state.joined, list_id, tracking=state.tracking,
                                locale=state.locale)
        if decision.message is not None:
            decision.message.soft_bounces = state.soft_bounces or 0
        return decision

    def message_id(self, row: Row) -> str:
        return delivery_message_id(row.id, self.broadcast_id, self.from_email)

    def prepare(self, row: Row, email: str, name: str, attributes: dict, joined: datetime | str,
                list_id: int | None = None, tracking: str | None = None,
                locale: str | None = None) -> Decision:
        """This person's message, ready for the wire; or why their values cannot make one
        (a merge field that breaks on them, an address that cannot go in a header), which
        fails just their row."""

        list_id = list_id if list_id is not None else self.list_id
        token = self.tokens.make(row.subscriber_id or 0, list_id or 0, self.broadcast_id, joined)
        link = unsubscribe_url(token, self.base_url)
        view = self.view_links.url(row.id, row.subscriber_id, joined) if self.view_links else ""
        message_id = self.message_id(row)
        compiled, tracker, language = self.compiled, self.tracker, None
        if self.messages is not None:  # one language unless the revision has others
            language = self.messages.language
            if row.variant:  # an A/B test's variant after A (a test has one language)
                chosen = self.messages.for_variant(row.variant)
                compiled, tracker = chosen.compiled, chosen.tracker
            elif self.messages.versions and self.readers is not None:
                chosen = self.messages.for_reader(self.readers.of(locale, list_id))
                compiled, tracker, language = chosen.compiled, chosen.tracker, chosen.language
        try:
            rendered = compiled.render(
                email=email, name=name, attributes=attributes, unsubscribe_url=link, view_url=view,
                **({} if row.code is None else {CODE_FIELD: row.code}))
            if tracker is not None:  # off (or turned off a moment ago): untouched
                rendered = tracker.apply(rendered, tracking, delivery_id=row.id, list_id=list_id)
            headers = {
                "List-Unsubscribe": f"<{link}>",
                "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            }
            if language:
                headers["Content-Language"] = language
            fields = None
            if self.fields:
                # A JSON API takes the parts as they are (no MIME made, nor parsed back), and
                # fails this person's message exactly where the MIME message would fail.
                check_message(rendered, from_addr=self.from_header, to_addr=email,
                              message_id=message_id, headers=headers)
                wire = b""
                fields = MessageFields(
                    sender=self.from_header, to=email, subject=rendered.subject,
                    text=rendered.text, html=rendered.html, reply_to=None,
                    headers=[("Message-ID", message_id), *headers.items()],
                    attachments=self.attachments)
            else:
                payload = message_bytes(
                    rendered,
                    from_addr=self.from_header,
                    to_addr=email,
                    message_id=message_id,
                    headers=headers,
                    attachments=self.attachments,
                )
                wire = self.rt.transport.wire(payload)
        except MergeError as error:
            return Decision(fail=f"Broadside did not send it: {error.message.rstrip('.')}. Fix "
                                 "the merge field, or this person's values on their page."[:500])
        except Exception as error:  # one person's message, not the whole send
            return Decision(fail=unwritable(error, to_addr=email, from_email=self.from_email,
                                            what=f"row {row.id}")[:500])
        return Decision(message=Prepared(row.id, row.subscriber_id, email, message_id, wire,
                                         from_email=self.from_email, fields=fields))
