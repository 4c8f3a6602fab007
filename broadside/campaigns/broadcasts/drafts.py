"""Drafts: create and edit a broadcast before it is sent.

Only a draft's content changes (invariant 8: what was sent is frozen); the edit is one UPDATE
guarded by the draft state, so an edit racing a send either lands before the send freezes the
content or is refused. The status itself is written only by `broadside.campaigns.broadcasts.lifecycle`
(a new broadcast starts in its initial state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import ab_drafts, lifecycle, merge_person
from broadside.campaigns.broadcasts.merge_report import MergeReport, merge_report
from broadside.campaigns.broadcasts.service import get_broadcast, sender_of
from broadside.campaigns.codes.fields import check_code_fields, sample
from broadside.campaigns.codes.minting import clean_prefix
from broadside.campaigns.content.bodies import body_of
from broadside.campaigns.content.design import broadcast_design
from broadside.campaigns.content.versions import clean_versions
from broadside.campaigns.field_report import EDITOR_CHECKED
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import Broadcast, MailingList, Revision, Segment
from broadside.core.site_settings import clean_cap_hours, get_settings
from broadside.core.timeutil import utcnow
from broadside.delivery.identities.service import check_choice
from broadside.mail.body_formats import written_as, written_format
from broadside.mail.client_checks import ClientCheck, check_email
from broadside.mail.rendering import CompiledRevision, RenderedEmail, compiled_revision, freeze_content
from broadside.mail.text_part import clean_text_body

MAX_SUBJECT = 300
MAX_PREHEADER = 300
MAX_BODY = 500_000


class _Keep:
    """`update_draft`'s default for the frequency cap: leave it as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def _an_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_audience(session: Session, list_id: object, segment_id: object) -> None:
    """Exactly one audience: a list or a segment, and it exists."""
    if list_id is not None and segment_id is not None:
        raise ValidationError(_("Choose a list or a segment to send to, not both."))
    if segment_id is not None:
        if not _an_id(segment_id):
            raise ValidationError(_("The segment must be given by its id (a number)."))
        if session.get(Segment, segment_id) is None:
            raise ValidationError(_("There is no segment with id %(id)s.", id=segment_id))
        return
    if not _an_id(list_id):
        raise ValidationError(_("Choose a list or a segment to send to."))
    if session.get(MailingList, list_id) is None:
        raise ValidationError(_("There is no list with id %(id)s.", id=list_id))


def _validate(session: Session, list_id: object, segment_id: object, subject: object,
              preheader: object, body: object):
    _validate_audience(session, list_id, segment_id)
    for label, value, limit in ((_("The subject"), subject, MAX_SUBJECT),
                                (_("The preheader"), preheader, MAX_PREHEADER),
                                (_("The body"), body, MAX_BODY)):
        if not isinstance(value, str):
            raise ValidationError(_("%(field)s must be text.", field=label))
        if len(value) > limit:
            raise ValidationError(_("%(field)s is too long (%(length)s of %(limit)s characters).",
                                    field=label, length=len(value), limit=limit))
    if "\n" in str(subject) or "\r" in str(subject):
        raise ValidationError(_("The subject must be one line."))


def _versions(session: Session, raw: Any) -> list[dict[str, str]] | None:
    """The other languages' versions as stored; the default one is in Settings' language."""
    return clean_versions(raw, default_locale=get_settings(session).default_language)


def _prefix(value: str | None) -> str | None:
    return None if value is None else clean_prefix(value)


def create_draft(session: Session, *, list_id: int | None = None, segment_id: int | None = None,
                 subject: str = "", body: str = "", preheader: str = "",
                 skip_if_received_within_hours: Any = KEEP, identity_id: Any = None,
                 codes_prefix: str | None = None, body_format: str | None = None,
                 editor: str | None = None, versions: Any = None) -> Broadcast:
    """A new draft to a list or a segment. The frequency cap starts from the Settings default
    unless given (None: no cap); the sending identity is the default unless given; codes
    (`codes_prefix`, checked by `minting.clean_prefix`) are off unless given; the body is
    Markdown unless `body_format` (or the compose mode, `editor`) says otherwise."""
    _validate(session, list_id, segment_id, subject, preheader, body)
    cleaned = _versions(session, versions)
    body_format, editor = written_format(body_format=body_format, editor=editor)
    identity_id = check_choice(session, identity_id)
    if skip_if_received_within_hours is KEEP:
        cap = get_settings(session).default_skip_if_received_within_hours
    else:
        cap = clean_cap_hours(skip_if_received_within_hours)
    broadcast = Broadcast(list_id=list_id, segment_id=segment_id, subject=subject.strip(),
                          preheader=preheader.strip(), body=written_as(body, body_format),
                          body_format=body_format, editor=editor,
                          skip_if_received_within_hours=cap,
                          status=lifecycle.INITIAL.value, identity_id=identity_id,
                          codes_prefix=_prefix(codes_prefix), versions=cleaned)
    session.add(broadcast)
    session.commit()
    return broadcast


def update_draft(session: Session, broadcast_id: int, *, list_id: int | None,
                 segment_id: int | None = None, subject: str, preheader: str, body: str,
                 skip_if_received_within_hours: Any = KEEP, identity_id: Any = KEEP,
                 codes_prefix: Any = KEEP, text_body: Any = KEEP, body_format: Any = KEEP,
                 editor: Any = KEEP, versions: Any = KEEP) -> Broadcast:
    """Edit a draft. Only drafts change: what was sent is frozen (invariant 8). The audience
    is a list or a segment (the other is cleared); the cap, the sending identity and how the
    body is written (`body_format`, the compose mode `editor`) are left alone unless given
    (identity None: the default). `text_body`: the plain-text part as the owner wrote it, None
    for the one made from the body. `versions`: all the other languages' (None or [] none)."""
    _validate(session, list_id, segment_id, subject, preheader, body)
    cleaned = KEEP if versions is KEEP else _versions(session, versions)
    current = session.get(Broadcast, broadcast_id)
    fmt, mode = written_format(
        body_format=None if body_format is KEEP else body_format,
        editor=None if editor is KEEP else editor,
        current_format=current.body_format if current else None,
        current_editor=current.editor if current else None)
    values: dict[str, Any] = {"list_id": list_id, "segment_id": segment_id,
                              "subject": subject.strip(), "preheader": preheader.strip(), "editor": mode,
                              "body": written_as(body, fmt), "body_format": fmt, "updated_at": utcnow(),
                              "ab_test": ab_drafts.synced(current, subject, preheader)}
    if skip_if_received_within_hours is not KEEP:
        values["skip_if_received_within_hours"] = clean_cap_hours(skip_if_received_within_hours)
    if identity_id is not KEEP:
        values["identity_id"] = check_choice(session, identity_id)
    if codes_prefix is not KEEP:
        values["codes_prefix"] = _prefix(codes_prefix)
    if text_body is not KEEP:
        values["text_body"] = clean_text_body(text_body)
    if cleaned is not KEEP:
        values["versions"] = cleaned
    result = session.execute(
        update(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status == lifecycle.DRAFT.value)
        .values(**values)
    )
    session.commit()
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound("There is no such broadcast.")
    if rowcount(result) == 0:
        raise Conflict(_("This broadcast has been sent and can no longer be edited; "
                         "duplicate it instead."))
    session.refresh(broadcast)
    return broadcast


def delete_draft(session: Session, broadcast_id: int) -> None:
    """Delete a draft (one DELETE guarded by the draft state: a broadcast sent meanwhile stays)."""
    result = session.execute(
        delete(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status == lifecycle.DRAFT.value)
        .execution_options(synchronize_session=False)
    )
    if rowcount(result) == 0:
        session.rollback()
        get_broadcast(session, broadcast_id)  # NotFound when there is no such broadcast
        raise Conflict(_("Only a draft can be deleted; this broadcast has been scheduled or sent."))
    session.commit()
    session.expunge_all()


def _live_identity(session: Session, identity_id: int) -> bool:
    try:
        check_choice(session, identity_id)
    except ValidationError:
        return False
    return True


# What a copy carries: what the owner wrote and chose (not Send's A/B seed, wait or winner).
COPIED = ("list_id", "segment_id", "subject", "preheader", "body", "body_format", "editor",
          "text_body", "skip_if_received_within_hours", "codes_prefix", "design_overrides",
          "attachment_ids", "versions", "view_in_browser", "tracking", "ab_test")


def duplicate(session: Session, broadcast_id: int) -> Broadcast:
    original = session.get(Broadcast, broadcast_id)
    if original is None:
        raise NotFound("There is no such broadcast.")
    copy = Broadcast(status=lifecycle.INITIAL.value, **{name: getattr(original, name) for name in COPIED},
                     # A deleted identity is not carried over: the copy takes the default.
                     identity_id=original.identity_id if original.identity_id is not None
                     and _live_identity(session, original.identity_id) else None)
    session.add(copy)
    session.commit()
    return copy


# ---------------------------------------------------------------- reading, for the pages

PAGE_SIZE = 50


@dataclass(frozen=True)
class BroadcastRow:
    broadcast: Broadcast
    list_name: str | None
    segment_name: str | None = None

    @property
    def audience(self) -> str | None:
        """What the broadcast goes to, in words: "Weekly" or "segment Berlin readers"."""
        return _("segment %(name)s", name=self.segment_name) if self.segment_name else self.list_name


@dataclass(frozen=True)
class BroadcastPage:
    rows: list[BroadcastRow]
    page: int
    has_next: bool


def list_broadcasts(session: Session, *, page: int = 1, per_page: int = PAGE_SIZE
                    ) -> BroadcastPage:
    """Broadcasts, most recently changed first, with the name of their list."""
    page = max(1, page)
    result = session.execute(
        select(Broadcast, MailingList.name, Segment.name)
        .outerjoin(MailingList, MailingList.id == Broadcast.list_id)
        .outerjoin(Segment, Segment.id == Broadcast.segment_id)
        .order_by(Broadcast.updated_at.desc(), Broadcast.id.desc())
        .offset((page - 1) * per_page)
        .limit(per_page + 1)
    ).all()
    rows = [BroadcastRow(broadcast, name, segment) for broadcast, name, segment in result]
    return BroadcastPage(rows=rows[:per_page], page=page, has_next=len(rows) > per_page)


def list_options(session: Session) -> list[tuple[int, str]]:
    """(id, name) of every list, for the "send to" choice."""
    return [(row.id, row.name) for row in
            session.execute(select(MailingList.id, MailingList.name).order_by(MailingList.name))]


def list_name(session: Session, list_id: int | None) -> str | None:
    if list_id is None:
        return None
    return session.scalar(select(MailingList.name).where(MailingList.id == list_id))


def segment_options(session: Session) -> list[tuple[int, str]]:
    """(id, name) of every segment, for the "send to" choice."""
    return [(row.id, row.name) for row in
            session.execute(select(Segment.id, Segment.name).order_by(Segment.name))]


def audience_options(session: Session) -> list[tuple[str, str, str]]:
    """The "send to" choice: (group, value, label), value "list:ID" or "segment:ID"."""
    return ([("Lists", f"list:{i}", name) for i, name in list_options(session)]
            + [("Segments", f"segment:{i}", name) for i, name in segment_options(session)])


def parse_audience(value: object) -> tuple[int | None, int | None]:
    """(list_id, segment_id) from a "list:ID" / "segment:ID" choice; (None, None) otherwise
    (the draft's validation then asks the owner to choose)."""
    kind, _, number = str(value or "").partition(":")
    if kind not in ("list", "segment") or not number.isdigit() or len(number) > 18:
        return None, None
    return (int(number), None) if kind == "list" else (None, int(number))


def audience_value(broadcast: Broadcast) -> str:
    if broadcast.segment_id is not None:
        return f"segment:{broadcast.segment_id}"
    return f"list:{broadcast.list_id}" if broadcast.list_id is not None else ""


def audience_name(session: Session, broadcast: Broadcast) -> str | None:
    """What a broadcast goes to, in words: the list's name or "segment NAME"."""
    if broadcast.segment_id is not None:
        name = session.scalar(select(Segment.name).where(Segment.id == broadcast.segment_id))
        return _("segment %(name)s", name=name) if name else None
    return list_name(session, broadcast.list_id)


@dataclass(frozen=True)
class DraftPreview:
    """What a broadcast looks like in an inbox, or why it cannot be rendered yet."""

    broadcast: Broadcast
    from_name: str
    from_email: str
    postal_address: str
    rendered: RenderedEmail | None
    problem: str | None
    frozen: bool  # True when this is the revision that was (or is being) sent
    # A draft's merge fields checked against its audience (asked for by the editor).
    merge: MergeReport | None = None
    person: merge_person.MergePerson | None = None  # whose details filled it (None: Alex)

    @property
    def client_checks(self) -> list[ClientCheck]:
        """What in this rendered copy breaks in mail clients (broadside.mail.client_checks)."""
        return check_email(self.rendered.html) if self.rendered is not None else []


def preview_email(session: Session, broadcast_id: int, *, sample_email: str,
                  default_from: str, check_fields: bool = False,
                  person: merge_person.MergePerson | None = None) -> DraftPreview:
    """Render a broadcast for a sample recipient with the renderer the worker uses.

    A sent broadcast shows its frozen revision (what the list received); a draft is rendered
    from its current text with the current settings. The sample recipient is named Alex.
    With `check_fields`, a draft's merge fields are also checked against its audience
    (`merge_report`: unknown fields, recipients lacking an attribute). `person`: a
    subscriber whose details fill the merge fields instead ("Preview as").
    """

    broadcast = get_broadcast(session, broadcast_id)
    revision = session.scalar(select(Revision).where(Revision.broadcast_id == broadcast_id))
    values: dict[str, Any] = {"email": sample_email, "name": "Alex", "attributes": {},
                              "unsubscribe_url": "#"}
    if person is not None:
        values.update(merge_person.fill_values(person))
    prefix = revision.codes_prefix if revision is not None else broadcast.codes_prefix
    if prefix is not None:
        values["code"] = sample(prefix)  # never a minted code
    try:
        if revision is not None:
            compiled = compiled_revision(revision.subject, revision.html_template,
                                         revision.text_template)
            return DraftPreview(broadcast, revision.from_name, revision.from_email,
                                revision.postal_address, compiled.render(**values), None, True,
                                person=person)
        from_name, from_email, postal_address = sender_of(session, broadcast.identity_id,
                                                          default_from)
        frozen = freeze_content(subject=broadcast.subject, preheader=broadcast.preheader,
                                **body_of(session, broadcast).freeze_arguments(),
                                from_name=from_name,
                                from_email=from_email, postal_address=postal_address,
                                design=broadcast_design(session, broadcast, from_name))
        check_code_fields({"subject": broadcast.subject, "preheader": broadcast.preheader,
                           "body": broadcast.body, "plain-text part": broadcast.text_body or ""},
                          prefix is not None)  # as Send would
        compiled = CompiledRevision(subject=broadcast.subject,
                                    html_template=frozen.html_template,
                                    text_template=frozen.text_template)
        rendered = compiled.render(**values)
    except ValidationError as exc:
        return DraftPreview(broadcast, "", "", "", None, exc.message, revision is not None)
    return DraftPreview(broadcast, from_name, from_email, postal_address, rendered, None, False,
                        merge_report(session, broadcast, limit=EDITOR_CHECKED)
                        if check_fields else None, person=person)


def autosave(session: Session, broadcast_id: int, *, list_id: int | None,
             segment_id: int | None = None, subject: str, preheader: str, body: str,
             sample_email: str, default_from: str,
             skip_if_received_within_hours: Any = KEEP, identity_id: Any = KEEP,
             codes_prefix: Any = KEEP, text_body: Any = KEEP, body_format: Any = KEEP,
             editor: Any = KEEP, person: merge_person.MergePerson | None = None) -> DraftPreview:
    """Save the draft (all or nothing, as update_draft) and render its new preview."""
    update_draft(session, broadcast_id, list_id=list_id, segment_id=segment_id, subject=subject,
                 preheader=preheader, body=body,
                 skip_if_received_within_hours=skip_if_received_within_hours,
                 identity_id=identity_id, codes_prefix=codes_prefix, text_body=text_body,
                 body_format=body_format, editor=editor)
    return preview_email(session, broadcast_id, sample_email=sample_email,
                         default_from=default_from, check_fields=True, person=person)


def broadcasts_before(session: Session, *, before: int | None = None, limit: int = PAGE_SIZE
                      ) -> tuple[list[Broadcast], int | None]:
    """Newest first by id (ids are never reused, so this is creation order), for the API's
    keyset paging: the broadcasts with ids below `before` (all when None), and the id to pass
    as `before` for the next page, None on the last one. Every broadcast that exists throughout
    the paging is seen exactly once; none is seen twice, whatever changes meanwhile."""
    query = select(Broadcast).order_by(Broadcast.id.desc()).limit(limit + 1)
    if before is not None:
        query = query.where(Broadcast.id < before)
    rows = list(session.scalars(query))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, rows[-1].id if more and rows else None
