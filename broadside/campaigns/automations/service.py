"""Automations: parse and save them with their steps, read them back with their counts, send
a step as a test.

Saving validates everything but the merge syntax here, then writes the steps through `steps`
(changed content frozen into a new revision, invariant 8; removed steps retired) in the same
commit. The state (enabled, disabled, paused, deleted) moves only through `lifecycle`. What
the automations send to people, read for the dashboard and the subscriber page: `messages`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.campaigns.automations import durations, lifecycle, refreeze
from broadside.campaigns.automations.entering import live_steps
from broadside.campaigns.automations.steps import StepInput, save_steps, step_input
from broadside.campaigns.broadcasts import merge_person
from broadside.campaigns.broadcasts.merge_person import MergePerson
from broadside.campaigns.codes.fields import sample
from broadside.campaigns.codes.minting import codes_json
from broadside.campaigns.feeds import trigger as feeds
from broadside.core.addresses import normalise_email
from broadside.core.errors import Conflict, Forbidden, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import (
    Automation,
    AutomationEntry,
    AutomationMessage,
    AutomationRevision,
    AutomationStep,
    MailingList,
    Segment,
)
from broadside.core.models.automations import TRIGGERS, AutomationStatus
from broadside.core.models.sending import DELIVERY_STATUSES
from broadside.core.timeutil import utcnow
from broadside.delivery.identities import lifecycle as identity_lifecycle
from broadside.delivery.identities.service import check_choice
from broadside.delivery.queues import Jobs
from broadside.delivery.transactional import queue_transactional
from broadside.mail.rendering import CompiledRevision, RenderedEmail
from broadside.segments.rules import MAX_ID

MAX_NAME = 200
MAX_STEPS = 20
MAX_SUBJECT = 300
MAX_PREHEADER = 300
MAX_BODY = 500_000
MAX_EVERY_HOURS = 720
MAX_PRIORITY = 1000


@dataclass
class AutomationInput:
    name: str
    trigger_type: str  # joined_list | segment | feed
    list_id: int | None = None
    segment_id: int | None = None
    every_hours: int = 12
    priority: int = 0
    record_only: bool = False
    steps: list[StepInput] = field(default_factory=list)
    identity_id: int | None = None  # the sending identity; None: the default
    feed: feeds.FeedTrigger | None = None  # a feed trigger's own fields


def _an_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _an_id(value: object) -> bool:
    """A database id: looked up beyond the id columns' range, PostgreSQL raises."""
    return _an_int(value) and 1 <= value <= MAX_ID  # type: ignore[operator]


def _text(value: object, label: str, limit: int, *, required: bool = False, one_line: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValidationError(f"The {label} must be text.")
    if "\x00" in value:
        raise ValidationError(f"The {label} contains a NUL character.")
    if len(value) > limit:
        raise ValidationError(f"The {label} is too long ({len(value)} of {limit} characters).")
    if one_line and ("\n" in value or "\r" in value):
        raise ValidationError(f"The {label} must be one line.")
    if required and not value.strip():
        raise ValidationError(f"Give the {label}.")
    return value


def parse_input(data: Any) -> AutomationInput:
    """The API's JSON shape (also what the owner's form is turned into), validated: every
    mistake is a ValidationError naming the field (and the step, by its number)."""
    if not isinstance(data, dict):
        raise ValidationError("Send a JSON object with name, trigger and steps.")
    known = {"name", "trigger", "priority", "record_only", "steps", "identity_id"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValidationError(f"Unknown field: {unknown[0]}. An automation has "
                              "name, trigger, priority, record_only, identity_id and steps.")
    name = " ".join(_text(data.get("name"), "name", MAX_NAME, required=True).split())
    trigger = data.get("trigger")
    if not isinstance(trigger, dict) or trigger.get("type") not in TRIGGERS:
        raise ValidationError('The trigger must be {"type": "joined_list", "list_id": N}, '
                              '{"type": "segment", "segment_id": N, "every_hours": H} or '
                              f"{feeds.SHAPE}.", field="trigger")
    result = AutomationInput(name=name, trigger_type=trigger["type"])
    if trigger["type"] == "feed":
        result.feed = feeds.parse_trigger(trigger)
        result.list_id, result.segment_id = feeds.audience_ids(trigger)
    elif trigger["type"] == "joined_list":
        if set(trigger) - {"type", "list_id"}:
            raise ValidationError('A "joined_list" trigger has only type and list_id.')
        if not _an_id(trigger.get("list_id")):
            raise ValidationError(f"The trigger's list_id must be a list's id (a number from 1 to {MAX_ID}).")
        result.list_id = trigger["list_id"]
    else:
        if set(trigger) - {"type", "segment_id", "every_hours"}:
            raise ValidationError('A "segment" trigger has only type, segment_id and every_hours.')
        if not _an_id(trigger.get("segment_id")):
            raise ValidationError("The trigger's segment_id must be a segment's id "
                                  f"(a number from 1 to {MAX_ID}).")
        result.segment_id = trigger["segment_id"]
        every = trigger.get("every_hours", 12)
        if not _an_int(every) or not 1 <= every <= MAX_EVERY_HOURS:
            raise ValidationError(f"every_hours must be a whole number from 1 to {MAX_EVERY_HOURS}.")
        result.every_hours = every
    priority = data.get("priority", 0)
    if not _an_int(priority) or not -MAX_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValidationError(f"priority must be a whole number from -{MAX_PRIORITY} to {MAX_PRIORITY} "
                              "(higher runs first).")
    result.priority = priority
    record_only = data.get("record_only", False)
    if not isinstance(record_only, bool):
        raise ValidationError("record_only must be true or false.")
    result.record_only = record_only
    identity_id = data.get("identity_id")
    if identity_id is not None and not _an_id(identity_id):
        raise ValidationError("identity_id must be a sending identity's id (or null for the default).")
    result.identity_id = identity_id
    steps = data.get("steps", [])
    if not isinstance(steps, list):
        raise ValidationError("steps must be a list.")
    for number, step in enumerate(steps, start=1):
        wanted = step_input(number, step)
        if wanted.id is not None and not _an_id(wanted.id):
            raise ValidationError(f"Step {number}: the id must be an existing step's id (a number).")
        result.steps.append(wanted)
    return result


IS_ON = "This automation is on: a sender, admin or owner can turn it off so you can {verb} it."


def name_key(name: str) -> str:
    """What makes two names the same: case ignored. UNIQUE among automations not deleted
    (deleting sets it to NULL), so two racing saves of one name cannot both land."""
    return name.lower()


def _check(session: Session, data: AutomationInput, except_id: int | None = None) -> list[int]:
    """Everything but the merge syntax (checked when freezing); returns each step's delay."""
    if data.trigger_type == "feed":
        feeds.check_audience(session, data.list_id, data.segment_id, len(data.steps))
    elif data.trigger_type == "joined_list":
        if data.list_id is None or session.get(MailingList, data.list_id) is None:
            raise ValidationError(f"There is no list with id {data.list_id}.")
        data.segment_id = None
    else:
        if data.segment_id is None or session.get(Segment, data.segment_id) is None:
            raise ValidationError(f"There is no segment with id {data.segment_id}.")
        data.list_id = None
    taken = select(Automation.id).where(Automation.name_key == name_key(data.name))
    if except_id is not None:
        taken = taken.where(Automation.id != except_id)
    if session.scalar(taken.limit(1)) is not None:
        raise Conflict(_("An automation named '%(name)s' already exists.", name=data.name))
    if len(data.steps) > MAX_STEPS:
        raise ValidationError(_("An automation has at most %(n)s steps.", n=MAX_STEPS))
    delays = []
    for number, step in enumerate(data.steps, start=1):
        where = f"Step {number}"
        delays.append(durations.parse_duration(step.delay, f"{where}: the delay"))
        step.subject = " ".join(_text(step.subject, f"subject of step {number}", MAX_SUBJECT,
                                      required=True, one_line=True).split())
        step.preheader = _text(step.preheader, f"preheader of step {number}", MAX_PREHEADER,
                               one_line=True).strip()
        step.body = _text(step.body, f"body of step {number}", MAX_BODY)
    return delays


def create_automation(session: Session, data: AutomationInput, *, default_from: str) -> Automation:
    """A new automation, disabled until the owner enables it."""
    delays = _check(session, data)
    return _write(session, Automation(status=AutomationStatus.DISABLED.value), data, delays,
                  default_from)


def update_automation(session: Session, automation_id: int, data: AutomationInput, *,
                      default_from: str, only_if_off: bool = False) -> Automation:
    """Save it; `only_if_off` (a writer): refused (403, nothing written) unless disabled."""
    # Two saves of one automation at once take turns (its row is locked until the commit),
    # so they cannot both add a step at the same position; an enable meanwhile is seen.
    automation = _locked(session, automation_id, only_if_off=only_if_off, verb="edit")
    delays = _check(session, data, except_id=automation_id)
    return _write(session, automation, data, delays, default_from)


def _write(session: Session, automation: Automation, data: AutomationInput, delays: list[int],
           default_from: str) -> Automation:
    """The automation's fields and steps in one commit, or nothing (a name taken meanwhile is
    a Conflict: the UNIQUE name key decides between two racing saves)."""
    try:
        automation.name, automation.name_key = data.name, name_key(data.name)
        automation.trigger_type = data.trigger_type
        automation.list_id, automation.segment_id = data.list_id, data.segment_id
        automation.every_hours, automation.priority = data.every_hours, data.priority
        automation.record_only = data.record_only
        identity_changed = automation.id is not None and automation.identity_id != data.identity_id
        automation.identity_id = check_choice(session, data.identity_id)
        automation.updated_at = utcnow()
        session.add(automation)
        session.flush()
        save_steps(session, automation, data.steps, delays, default_from, identity_changed)
        if data.feed is not None:
            feeds.save_feed(session, automation.id, data.feed)
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Conflict(_("An automation named '%(name)s' already exists.", name=data.name)) from None
    except Exception:
        session.rollback()
        raise
    return automation


def _locked(session: Session, automation_id: int, *, only_if_off: bool, verb: str) -> Automation:
    session.execute(select(Automation.id).where(Automation.id == automation_id).with_for_update())
    automation = get_automation(session, automation_id)
    if only_if_off and automation.status != AutomationStatus.DISABLED.value:
        session.rollback()
        raise Forbidden(IS_ON.format(verb=verb))
    return automation


def get_automation(session: Session, automation_id: int) -> Automation:
    automation = session.get(Automation, automation_id)
    if automation is None or automation.status == AutomationStatus.DELETED.value:
        raise NotFound("There is no such automation.")
    return automation


def list_automations(session: Session) -> list[Automation]:
    return list(session.scalars(
        select(Automation).where(Automation.status != AutomationStatus.DELETED.value)
        .order_by(Automation.priority.desc(), Automation.id)
    ))


def steps_of(session: Session, automation_id: int) -> list[AutomationStep]:
    return live_steps(session, automation_id)


def as_input(session: Session, automation: Automation) -> dict[str, Any]:
    """The automation in the API's shape (what `parse_input` reads)."""
    trigger: dict[str, Any] = (
        {"type": "joined_list", "list_id": automation.list_id}
        if automation.trigger_type == "joined_list"
        else feeds.shown(session, automation) if automation.trigger_type == "feed"
        else {"type": "segment", "segment_id": automation.segment_id,
              "every_hours": automation.every_hours})
    return {"name": automation.name, "trigger": trigger, "priority": automation.priority,
            "record_only": automation.record_only, "identity_id": automation.identity_id,
            "steps": [{"delay": s.delay, "subject": s.subject, "preheader": s.preheader,
                       "body": s.body, "format": s.body_format, "codes": codes_json(s.codes_prefix),
                       "text": s.text_body, "attachments": s.attachment_ids or [],
                       "versions": s.versions or []}
                      for s in steps_of(session, automation.id)]}


def _move(session: Session, automation_id: int, name: str, refusal: str) -> Automation:
    automation = get_automation(session, automation_id)
    if name == "enable":
        if not steps_of(session, automation_id) and not automation.record_only:
            raise ValidationError(_("Add at least one step before enabling this automation."))
        if automation.list_id is None and automation.segment_id is None:
            raise ValidationError(_("Its list or segment was deleted: choose another trigger first."))
        problem = refreeze.postal_problem(session, automation)
        if problem:
            raise ValidationError(problem)
    was_paused = automation.status == AutomationStatus.PAUSED.value
    moved = lifecycle.move(session, automation_id, name)
    if moved and name == "enable" and was_paused:
        # Resuming after a channel-wide pause: the owner says the cause is fixed, so its
        # identity's pause is lifted too (or the stream would hold it still).
        identity_lifecycle.resume(session, automation.identity_id,
                                  label=f"resumed with automation {automation_id}")
    session.commit()
    session.refresh(automation)
    if not moved and automation.status != lifecycle.TRANSITIONS[name].target.value:
        raise Conflict(refusal)
    return automation


def enable(session: Session, automation_id: int) -> Automation:
    """Enabled (or resumed after a channel-wide pause): its held messages go out."""
    return _move(session, automation_id, "enable", "This automation cannot be enabled now.")


def disable(session: Session, automation_id: int) -> Automation:
    """Disabled: nobody new enters and its due messages are held until it is enabled."""
    return _move(session, automation_id, "disable", "This automation cannot be disabled now.")


def delete(session: Session, automation_id: int, *, only_if_off: bool = False) -> None:
    """Deleted: its pending messages are skipped with the reason; what it sent is kept."""
    _locked(session, automation_id, only_if_off=only_if_off, verb="delete")
    lifecycle.move(session, automation_id, "delete")
    session.commit()


# ---------------------------------------------------------------- reading


def step_counts(session: Session, automation_id: int) -> dict[int, dict[str, int]]:
    """step id -> {status: messages}, every status present (zeros included)."""
    counts: dict[int, dict[str, int]] = {}
    for step_id, status, count in session.execute(
        select(AutomationMessage.step_id, AutomationMessage.status, func.count())
        .where(AutomationMessage.automation_id == automation_id)
        .group_by(AutomationMessage.step_id, AutomationMessage.status)
    ):
        counts.setdefault(step_id, dict.fromkeys(DELIVERY_STATUSES, 0))[status] = count
    return counts


def entered_count(session: Session, automation_id: int) -> int:
    return session.scalar(select(func.count()).select_from(AutomationEntry)
                          .where(AutomationEntry.automation_id == automation_id)) or 0


def get_step(session: Session, automation_id: int, step_id: int) -> AutomationStep:
    step = session.scalar(select(AutomationStep).where(
        and_(AutomationStep.id == step_id, AutomationStep.automation_id == automation_id,
             AutomationStep.removed_at.is_(None))))
    if step is None:
        raise NotFound("There is no such step.")
    return step


def send_step_test(session: Session, automation_id: int, step_id: int, to_email: str, *,
                   default_from: str, jobs: Jobs, person: MergePerson | None = None) -> int:
    """One copy of a step's current revision to any address, through the transactional
    queue, marked as a test (its unsubscribe link goes nowhere). Its merge fields are filled
    in with `person`'s details (the owner's pick), by default the newest active person the
    automation's list or segment reaches, else the sample. Returns the message id."""
    automation = get_automation(session, automation_id)
    step = get_step(session, automation_id, step_id)
    address = normalise_email(to_email)
    revision = session.get(AutomationRevision, step.revision_id) if step.revision_id else None
    if revision is None:
        raise ValidationError(_("Save this step with a subject before sending a test."))
    if person is None:
        person = merge_person.default_person(session, list_id=automation.list_id,
                                             segment_id=automation.segment_id)
    code: dict[str, Any] = ({} if revision.codes_prefix is None
                            else {"code": sample(revision.codes_prefix)})
    rendered = CompiledRevision(subject=revision.subject, html_template=revision.html_template,
                                text_template=revision.text_template).render(
        **merge_person.fill_values(person), unsubscribe_url="#test-send", **code)
    message = queue_transactional(
        session, jobs, kind="test", to_email=address, subject=f"[Test] {rendered.subject}",
        html=rendered.html, text=rendered.text,
        headers={"From-Name": revision.from_name, "From-Email": revision.from_email},
        identity_id=automation.identity_id, attachment_ids=revision.attachment_ids,
    )
    return message.id


def preview_step(session: Session, automation_id: int, step_id: int, *, sample_email: str
                 ) -> tuple[AutomationRevision, RenderedEmail]:
    """A step's current revision rendered for a sample recipient (Alex), as the worker would."""
    get_automation(session, automation_id)
    step = get_step(session, automation_id, step_id)
    revision = session.get(AutomationRevision, step.revision_id) if step.revision_id else None
    if revision is None:
        raise NotFound("This step has no saved content yet.")
    rendered = CompiledRevision(subject=revision.subject, html_template=revision.html_template,
                                text_template=revision.text_template).render(
        email=sample_email, name="Alex", attributes={}, unsubscribe_url="#",
        **({} if revision.codes_prefix is None else {"code": sample(revision.codes_prefix)}))
    return revision, rendered
