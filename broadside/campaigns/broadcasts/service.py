"""Sending a broadcast and steering it: send, schedule, pause, resume, cancel, retry.

Plain functions over a SQLAlchemy session; the pages, the API and the worker share them.
Every state change of a broadcast is a transition of `broadside.campaigns.broadcasts.lifecycle` (one
predicate-guarded UPDATE naming the states it may leave), so two owners pressing "send" at
once get exactly one send; every change of a delivery goes through the ledger
(`broadside.campaigns.broadcasts.ledger`), whose lock order (the broadcast row, then its deliveries)
these functions keep.
"""

from __future__ import annotations

from datetime import datetime
from email.utils import parseaddr
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from broadside.campaigns.analytics.sending import freeze_tracking
from broadside.campaigns.broadcasts import (
    ab_drafts,
    ab_results,
    ab_sending,
    cancelling,
    ledger,
    lifecycle,
    merge_person,
)
from broadside.campaigns.broadcasts import snapshot as audience_snapshot
from broadside.campaigns.broadcasts.ab_tests import LETTERS
from broadside.campaigns.broadcasts.merge_person import MergePerson
from broadside.campaigns.codes.fields import check_code_fields
from broadside.campaigns.codes.fields import sample as code_sample
from broadside.campaigns.content.bodies import WrittenBody, body_of
from broadside.campaigns.content.design import broadcast_design
from broadside.campaigns.content.languages import freeze_default, freeze_in_languages, version_body
from broadside.campaigns.content.versions import clean_versions
from broadside.core.addresses import normalise_email
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.events import record_event
from broadside.core.i18n import _
from broadside.core.logs import owner_action
from broadside.core.models import Broadcast, Delivery, Identity, Revision, Segment
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.delivery.identities import lifecycle as identity_lifecycle
from broadside.delivery.queues import Jobs
from broadside.delivery.transactional import queue_transactional
from broadside.mail.rendering import CompiledRevision, EmailDesign, FrozenContent, freeze_content

PAUSE_BY_OWNER = "Paused by the owner. Press Resume to continue from where it stopped."


def get_broadcast(session: Session, broadcast_id: int) -> Broadcast:
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound(_("There is no such broadcast."))
    return broadcast


def _enqueue(jobs: Jobs, broadcast_id: int, identity_id: int | None) -> None:
    try:
        jobs.enqueue_slice(broadcast_id, identity_id)
    except RedisError:
        # Redis is down: the broadcast stays queued in the database and the worker's
        # orphan repair gives it a job once Redis is back.
        pass


def sender_identity(session: Session, default_from: str) -> tuple[str, str]:
    """The default identity's (name, address): the settings page's, falling back to MAIL_FROM."""

    settings = get_settings(session)
    if settings.sender_email:
        return settings.sender_name or "", settings.sender_email
    name, address = parseaddr(default_from)
    return name, address


def sender_of(session: Session, identity_id: int | None, default_from: str) -> tuple[str, str, str]:
    """(From name, From address, postal address) of a sending identity (None: the default).
    An identity without a postal address of its own uses the Settings page's."""
    postal = get_settings(session).postal_address
    if identity_id is not None:
        identity = session.get(Identity, identity_id)
        if identity is not None:
            return identity.from_name, identity.from_email, identity.postal_address or postal
    name, address = sender_identity(session, default_from)
    return name, address, postal


def freeze_revision(session: Session, broadcast: Broadcast, default_from: str) -> Revision:
    """Invariant 8: pressing send freezes subject, body, sender and rendered layout."""

    from_name, from_email, postal = sender_of(session, broadcast.identity_id, default_from)
    written = body_of(session, broadcast)

    def freeze(subject: str, preheader: str, body: WrittenBody, design: EmailDesign,
               language: str, direction: str) -> FrozenContent:
        return freeze_content(subject=subject, preheader=preheader, **body.freeze_arguments(),
                              from_name=from_name, from_email=from_email, postal_address=postal,
                              design=design, language=language, direction=direction)

    # Every language a reader may get it in, each with the design at send time (Settings',
    # the template's changes over it) and its footer in that language: frozen here.
    design = broadcast_design(session, broadcast, from_name)
    frozen, versions = freeze_in_languages(
        session, subject=broadcast.subject, preheader=broadcast.preheader, written=written,
        versions=clean_versions(broadcast.versions), design=design, freeze=freeze)
    variants = ab_sending.freeze_variants(  # an A/B test's variants after A: frozen alike
        broadcast, written, lambda subject, preheader, body: freeze_default(
            session, subject=subject, preheader=preheader, written=body, design=design,
            freeze=freeze), lambda body: version_body(session, body, written))
    check_code_fields({"subject": broadcast.subject, "preheader": broadcast.preheader,
                       "body": broadcast.body, "plain-text part": broadcast.text_body or ""},
                      broadcast.codes_prefix is not None)
    revision = Revision(
        broadcast_id=broadcast.id,
        subject=broadcast.subject,
        preheader=broadcast.preheader,
        body_markdown=written.body,
        body_format=written.body_format,
        attachment_ids=list(written.attachment_ids) or None,
        html_template=frozen.html_template,
        text_template=frozen.text_template,
        from_name=from_name,
        from_email=from_email,
        postal_address=postal,
        codes_prefix=broadcast.codes_prefix,  # what the worker's claims mint: frozen with it
        versions=versions,
        variants=variants,
    )
    session.add(revision)
    return revision


def send_broadcast(
    session: Session,
    broadcast_id: int,
    *,
    default_from: str,
    jobs: Jobs | None,
    scheduled: bool = False,
) -> Broadcast:
    """Freeze the content (invariant 8), decide the audience, queue it (with `jobs=None` the
    job is left to the worker's orphan repair). `scheduled`: the worker starting a scheduled
    broadcast whose time has come, not the owner pressing send.

    Answers at once at any list size: the audience's rows are written in the same transaction
    only when it cannot be large; otherwise the worker writes them in chunks before its first
    slices (`broadside.campaigns.broadcasts.snapshot`), and sending starts after the first chunk."""
    broadcast = get_broadcast(session, broadcast_id)
    if not broadcast.subject.strip():
        raise ValidationError(_("Give the broadcast a subject before sending it."))
    segment = session.get(Segment, broadcast.segment_id) if broadcast.segment_id is not None else None
    if broadcast.list_id is None and segment is None:
        raise ValidationError(_("Choose a list or a segment to send to."))
    if broadcast.identity_id is not None:
        identity = session.get(Identity, broadcast.identity_id)
        if identity is None or identity.status == "deleted":
            raise ValidationError(_("This broadcast's sending identity was deleted; choose another."))
    refusal = ab_results.ab_refusal(session, broadcast) if broadcast.ab_test else None
    if refusal is not None:
        raise ValidationError(refusal)

    def snapshot() -> str:
        revision = freeze_revision(session, broadcast, default_from)
        freeze_tracking(session, broadcast, revision)
        # The audience is decided here; its rows are written now when it cannot be large,
        # else by the worker in chunks (broadside.campaigns.broadcasts.snapshot).
        return audience_snapshot.begin(session, broadcast, segment)

    try:
        # The guarded UPDATE is the lock: of two concurrent sends, one moves the row, one gets
        # 0; the snapshot is taken only by the one that moved it.
        won = lifecycle.move(
            session, broadcast_id, "send_scheduled" if scheduled else "send", then=snapshot
        )
        if won:
            session.commit()
    except Exception:
        session.rollback()
        raise
    if not won:
        session.rollback()
        raise Conflict(_("This broadcast is not a draft any more; it has already been sent or queued."))
    session.refresh(broadcast)
    owner_action("broadcast queued", broadcast_id=broadcast_id, recipients=broadcast.total)
    if jobs is not None:
        _enqueue(jobs, broadcast_id, broadcast.identity_id)
    return broadcast


def _steer(
    session: Session,
    broadcast_id: int,
    transition: str,
    refusal: str,
    **arguments: Any,
) -> None:
    """One lifecycle transition on the owner's behalf. Does not commit; raises NotFound or
    Conflict (after a rollback) when the transition's guard refuses."""
    if not lifecycle.move(session, broadcast_id, transition, **arguments):
        session.rollback()
        get_broadcast(session, broadcast_id)
        raise Conflict(refusal)


def schedule_broadcast(session: Session, broadcast_id: int, at_utc: datetime) -> Broadcast:
    if at_utc <= utcnow():
        raise ValidationError(_("Choose a time in the future."))
    _steer(
        session,
        broadcast_id,
        "schedule",
        _("Only a draft can be scheduled."),
        scheduled_at=at_utc,
        detail=at_utc.isoformat() + "Z",
    )
    session.commit()
    owner_action("broadcast scheduled", broadcast_id=broadcast_id)
    return get_broadcast(session, broadcast_id)


def unschedule_broadcast(session: Session, broadcast_id: int) -> Broadcast:
    _steer(session, broadcast_id, "unschedule", _("This broadcast is not scheduled."))
    session.commit()
    owner_action("broadcast unscheduled", broadcast_id=broadcast_id)
    return get_broadcast(session, broadcast_id)


def pause_broadcast(session: Session, broadcast_id: int, reason: str = PAUSE_BY_OWNER) -> Broadcast:
    """The owner's pause (the worker pauses through the same `lifecycle.pause`)."""
    if not lifecycle.pause(session, broadcast_id, reason):
        session.rollback()
        get_broadcast(session, broadcast_id)
        raise Conflict(_("Only a queued or sending broadcast can be paused."))
    session.commit()
    owner_action("broadcast paused", broadcast_id=broadcast_id)
    return get_broadcast(session, broadcast_id)


def resume_broadcast(session: Session, broadcast_id: int, *, jobs: Jobs) -> Broadcast:
    """Continue from the rows still pending; never restart (invariant 7)."""
    _steer(session, broadcast_id, "resume", _("Only a paused broadcast can be resumed."))
    session.commit()
    owner_action("broadcast resumed", broadcast_id=broadcast_id)
    broadcast = get_broadcast(session, broadcast_id)
    # The owner says the cause is fixed: a pause of its identity (the provider refused the
    # channel) is lifted with it, or the stream would hold it still.
    if identity_lifecycle.resume(session, broadcast.identity_id,
                                 label=f"resumed with broadcast {broadcast_id}"):
        session.commit()
    _enqueue(jobs, broadcast_id, broadcast.identity_id)
    return broadcast


def cancel_broadcast(session: Session, broadcast_id: int, *, jobs: Jobs | None = None) -> Broadcast:
    """Stop for good: every row still pending becomes skipped ("cancelled"), at once or soon.

    The broadcast row is moved (and so locked) first, then its deliveries: the ledger's lock
    order. A small broadcast's rows are skipped in this transaction; a large one's by the
    worker in short chunks (`broadside.campaigns.broadcasts.cancelling`: why nothing is sent meanwhile;
    its job is queued here when `jobs` is given, else by the worker's maintenance), so this
    answers in milliseconds at any size."""
    counts: dict[str, int] = {}
    _steer(
        session,
        broadcast_id,
        "cancel",
        _("Only a scheduled, queued, sending or paused broadcast can be cancelled."),
        then=lambda: cancelling.skip_or_defer(session, broadcast_id, counts),
    )
    session.commit()
    owner_action("broadcast cancelled", broadcast_id=broadcast_id, **counts)
    broadcast = get_broadcast(session, broadcast_id)
    if jobs is not None and broadcast.pending_count > 0:
        try:
            jobs.enqueue_slice(broadcast_id, broadcast.identity_id)  # it skips (jobs.tasks)
        except RedisError:
            pass  # the worker's maintenance queues it once Redis is back
    return broadcast


def retry_deliveries(session: Session, broadcast_id: int, *, which: str, jobs: Jobs) -> int:
    """The owner's confirmed "send again": `unknown` rows, or rows that ran out of retries.

    Never automatic (invariant 5): an unknown row may already be in the inbox.
    """
    broadcast = get_broadcast(session, broadcast_id)
    if which == "unknown":
        source, condition = "unknown", Delivery.status == "unknown"
    elif which == "transient":
        source = "failed"
        condition = and_(Delivery.status == "failed", Delivery.error_class == "transient")
    else:
        raise ValidationError(_("Choose which deliveries to send again: unknown or transient."))
    if broadcast.status not in (lifecycle.SENT, *lifecycle.ACTIVE, lifecycle.PAUSED):
        raise Conflict(_("Only a broadcast that has been sent can send again."))
    now = utcnow()
    rows = session.execute(
        select(Delivery.id, Delivery.subscriber_id).where(Delivery.broadcast_id == broadcast_id, condition)
    ).all()
    changes = [
        ledger.Change(
            d,
            s,
            {"attempts": 0, "next_attempt_at": None, "error_class": None},
            detail=f"sent again by the owner (was {source})",
        )
        for d, s in rows
    ]
    # Lock order: the ledger writes the broadcast's counters before the rows it moves.
    moved = ledger.transition(session, broadcast_id, changes, source=source, target="pending", now=now)
    if moved:
        detail = f"{len(moved)} {source} rows"
        # A finished broadcast goes back to the queue; an active or paused one just has more
        # rows pending. Either way one "resent" event.
        if not lifecycle.move(session, broadcast_id, "send_again", detail=detail):
            record_event(session, "resent", broadcast_id=broadcast_id, detail=detail)
    session.commit()
    if moved:
        owner_action("broadcast sending again", broadcast_id=broadcast_id, rows=len(moved), which=source)
        _enqueue(jobs, broadcast_id, broadcast.identity_id)
    return len(moved)


def send_test(session: Session, broadcast_id: int, to_email: str, *, default_from: str, jobs: Jobs,
              person: MergePerson | None = None, variant: str | None = None) -> int:
    """One copy to any address through the transactional queue, marked as a test (its
    unsubscribe link goes nowhere: a test reader is not unsubscribed by clicking it). Its
    merge fields are filled in with `person`'s details (`merge_person.chosen`: the owner's
    pick), by default the newest active person the broadcast reaches, else the sample.
    `variant`: the letter of an A/B test's variant to send (default A, the broadcast's own)."""

    address = normalise_email(to_email)
    broadcast = get_broadcast(session, broadcast_id)
    number = ab_drafts.chosen_variant(broadcast, variant)
    if person is None:
        person = merge_person.default_person(session, list_id=broadcast.list_id,
                                             segment_id=broadcast.segment_id)
    revision = session.scalar(select(Revision).where(Revision.broadcast_id == broadcast_id))
    if revision is not None:
        frozen_as = (revision.variants or {}).get(str(number)) if number else None
        subject, html_t, text_t = ((frozen_as["subject"], frozen_as["html_template"],
                                    frozen_as["text_template"]) if frozen_as else
                                   (revision.subject, revision.html_template, revision.text_template))
        from_name, from_email = revision.from_name, revision.from_email
        attachment_ids = revision.attachment_ids
    else:
        attachment_ids = broadcast.attachment_ids
        from_name, from_email, postal = sender_of(session, broadcast.identity_id, default_from)
        subject, preheader, own_body = ab_drafts.draft_variant(broadcast, number)
        written = body_of(session, broadcast)
        frozen = freeze_content(
            subject=subject,
            preheader=preheader,
            **(written if own_body is None else version_body(session, own_body, written)
               ).freeze_arguments(),
            from_name=from_name,
            from_email=from_email,
            postal_address=postal,
            design=broadcast_design(session, broadcast, from_name),
        )
        html_t, text_t = frozen.html_template, frozen.text_template
    prefix = revision.codes_prefix if revision is not None else broadcast.codes_prefix
    code: dict[str, Any] = {} if prefix is None else {"code": code_sample(prefix)}  # not minted
    rendered = CompiledRevision(subject=subject, html_template=html_t, text_template=text_t).render(
        **merge_person.fill_values(person), unsubscribe_url="#test-send", **code)
    message = queue_transactional(
        session,
        jobs,
        kind="test",
        to_email=address,
        subject=f"[Test {LETTERS[number]}] {rendered.subject}" if broadcast.ab_test
        else f"[Test] {rendered.subject}",
        html=rendered.html,
        text=rendered.text,
        headers={"From-Name": from_name, "From-Email": from_email},
        broadcast_id=broadcast_id,
        identity_id=broadcast.identity_id,
        attachment_ids=attachment_ids,
    )
    return message.id
