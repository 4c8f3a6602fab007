"""An automation's steps as the owner saves them: each wanted step matched to a saved one,
changed content frozen into a new immutable `AutomationRevision` (invariant 8), removed steps
retired.

A step's newer revision reaches only its messages not yet due (`ledger.reassign_revision`);
those already due keep theirs, so what each person got can always be reconstructed. A step
removed from a live automation keeps its messages (the send log) and its pending ones are
skipped with the reason. A changed delay applies to people who enter afterwards; those
already in the series keep the times they were given when they entered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from broadside.campaigns.automations import ledger
from broadside.campaigns.automations.entering import live_steps
from broadside.campaigns.broadcasts.service import sender_of
from broadside.campaigns.codes.fields import check_code_fields
from broadside.campaigns.codes.minting import codes_setting
from broadside.campaigns.content.bodies import WrittenBody, body_of
from broadside.campaigns.content.languages import freeze_in_languages
from broadside.campaigns.content.versions import clean_versions
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.core.models import Automation, AutomationMessage, AutomationRevision, AutomationStep
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.mail.attachment_use import checked_ids
from broadside.mail.body_formats import check_format, editor_for, written_as
from broadside.mail.design import sending_design
from broadside.mail.rendering import EmailDesign, FrozenContent, freeze_content
from broadside.mail.text_part import clean_text_body

STEP_REMOVED = "the step was removed from the automation"


@dataclass
class StepInput:
    delay: str = "PT0S"
    subject: str = ""
    body: str = ""
    preheader: str = ""
    id: int | None = None  # an existing step of this automation, kept (and moved) by its id
    codes_prefix: str | None = None  # "Mint a code per recipient": the prefix; None: off
    text_body: str | None = None  # the plain-text part as written; None: made from the body
    attachment_ids: list[Any] = field(default_factory=list)  # checked when saved
    body_format: str = "markdown"
    editor: str | None = None  # the compose mode (the page's); None: one that saves the format
    versions: Any = None  # the other languages' (content.versions.clean_versions when saved)


def step_input(number: int, step: Any) -> StepInput:
    """One step of an automation as the API gives it (`number` from 1), its fields checked
    for their kind; the id (checked by the caller) and the rest are checked when saved."""
    if not isinstance(step, dict):
        raise ValidationError(f"Step {number} must be an object with delay, subject and body.")
    extra = sorted(set(step) - {"delay", "subject", "body", "format", "preheader", "id", "codes",
                                "text", "attachments", "versions"})
    if extra:
        raise ValidationError(f"Step {number}: unknown field {extra[0]}; a step has delay, "
                              "subject, preheader, body, format, text, codes, attachments, "
                              "versions and id (to keep one).")
    return StepInput(
        delay=step.get("delay", "PT0S"),
        subject=step.get("subject", ""),
        body=step.get("body", ""),
        preheader=step.get("preheader", ""),
        id=step.get("id"), attachment_ids=step.get("attachments", []),  # checked when saved
        codes_prefix=codes_setting(step.get("codes"), f"steps[{number - 1}].codes",
                                   f"Step {number}: "),
        text_body=clean_text_body(step.get("text"), f"Step {number}: the plain-text part"),
        body_format=step.get("format", "markdown"),  # checked by steps.save_steps
        versions=step.get("versions"),  # checked by steps.save_steps
    )


def frozen_revision(session: Session, step: AutomationStep, identity_id: int | None,
                    default_from: str) -> AutomationRevision:
    """The step's content frozen with the sender, postal address and design in force now: a
    new revision, not yet added to the session (the caller adds it, or finds it `same_as`
    the step's current one). ValidationError names the step."""
    from_name, from_email, postal = sender_of(session, identity_id, default_from)
    written = body_of(session, step)

    def freeze(subject: str, preheader: str, body: WrittenBody, design: EmailDesign,
               language: str, direction: str) -> FrozenContent:
        return freeze_content(subject=subject, preheader=preheader, **body.freeze_arguments(),
                              from_name=from_name, from_email=from_email, postal_address=postal,
                              design=design, language=language, direction=direction)

    try:
        # Every language, whoever is on the list now: readers keep arriving after a save.
        frozen, versions = freeze_in_languages(
            session, subject=step.subject, preheader=step.preheader, written=written,
            versions=clean_versions(step.versions), design=sending_design(session, from_name),
            freeze=freeze, every_language=True)
        check_code_fields({"subject": step.subject, "preheader": step.preheader,
                           "body": step.body, "plain-text part": step.text_body or ""},
                          step.codes_prefix is not None)
    except ValidationError as exc:
        raise ValidationError(f"Step {step.position}: {exc.message}") from None
    return AutomationRevision(
        step_id=step.id, subject=step.subject, preheader=step.preheader,
        body_markdown=written.body, body_format=written.body_format,
        attachment_ids=list(written.attachment_ids) or None,
        html_template=frozen.html_template, text_template=frozen.text_template,
        from_name=from_name, from_email=from_email, postal_address=postal,
        codes_prefix=step.codes_prefix,  # frozen with the content: what its claims mint
        versions=versions,
    )


FROZEN_FIELDS = ("subject", "preheader", "body_markdown", "body_format", "attachment_ids",
                 "html_template", "text_template", "from_name", "from_email", "postal_address",
                 "codes_prefix", "versions")


def same_as(new: AutomationRevision, current: AutomationRevision | None) -> bool:
    """Whether a revision just frozen carries exactly what the current one does (then no new
    revision is needed: a save that changed nothing it freezes writes nothing)."""
    return current is not None and all(
        getattr(new, name) == getattr(current, name) for name in FROZEN_FIELDS)


def _frozen_revision(session: Session, step: AutomationStep, identity_id: int | None,
                     default_from: str) -> AutomationRevision:
    revision = frozen_revision(session, step, identity_id, default_from)
    session.add(revision)
    session.flush()
    return revision


def matched_steps(existing: list[AutomationStep], wanted: list[StepInput]) -> list[AutomationStep | None]:
    """Which saved step each wanted step is: by its id when the steps carry ids (the editor
    does, so removing step 1 keeps step 2's messages with step 2's content), else by position
    (a client that sends no ids replaces the steps in order). None: a new step."""
    if not any(w.id is not None for w in wanted):
        return [existing[i] if i < len(existing) else None for i in range(len(wanted))]
    by_id = {step.id: step for step in existing}
    matched: list[AutomationStep | None] = []
    for number, w in enumerate(wanted, start=1):
        if w.id is not None and w.id not in by_id:
            raise ValidationError(f"Step {number}: this automation has no step with id {w.id}.")
        if w.id is not None and by_id[w.id] in matched:
            raise ValidationError(f"Step {number}: step id {w.id} is given twice.")
        matched.append(by_id.get(w.id) if w.id is not None else None)
    return matched


def _versions(raw: Any, default_locale: str, position: int, index: int
              ) -> list[dict[str, str]] | None:
    """A step's versions as stored (`clean_versions`), a refusal naming the step."""
    try:
        return clean_versions(raw, default_locale=default_locale)
    except ValidationError as exc:
        raise ValidationError(_("Step %(n)s: %(problem)s", n=position, problem=exc.message),
                              field=f"steps[{index}].versions") from None


def save_steps(session: Session, automation: Automation, steps: list[StepInput], delays: list[int],
               default_from: str, identity_changed: bool) -> None:
    """The automation's steps as `steps`, in that order (`delays` parsed already): new and
    changed content frozen into a new revision, which reaches only messages not yet due;
    steps no longer wanted are removed, their pending messages skipped. Does not commit."""
    existing = live_steps(session, automation.id)
    matched = matched_steps(existing, steps)
    now = utcnow()
    default_locale = get_settings(session).default_language
    for index, (wanted, seconds, step) in enumerate(zip(steps, delays, matched, strict=True)):
        position = index + 1
        versions = _versions(wanted.versions, default_locale, position, index)
        attachments = checked_ids(session, wanted.attachment_ids, where=f"Step {position}: ",
                                  field=f"steps[{index}].attachments")
        wanted.body_format = check_format(wanted.body_format, f"steps[{index}].format")
        wanted.body = written_as(wanted.body, wanted.body_format)  # its merge fields as typed
        if step is None:
            step = AutomationStep(automation_id=automation.id, position=position)
            session.add(step)
            changed = True
        else:
            changed = (step.subject, step.preheader, step.body, step.body_format,
                       step.codes_prefix, step.text_body, step.attachment_ids or [],
                       step.versions) != (
                wanted.subject, wanted.preheader, wanted.body, wanted.body_format,
                wanted.codes_prefix, wanted.text_body, attachments, versions)
        step.position = position
        step.delay = wanted.delay.strip().upper()
        step.delay_seconds = seconds
        step.subject, step.preheader, step.body = wanted.subject, wanted.preheader, wanted.body
        step.editor = wanted.editor or editor_for(wanted.body_format)
        step.body_format = wanted.body_format
        step.codes_prefix = wanted.codes_prefix
        step.text_body = wanted.text_body
        step.attachment_ids = attachments or None
        step.versions = versions
        session.flush()
        # A new sending identity is new content too: its From is frozen into each revision.
        if changed or identity_changed or step.revision_id is None:
            revision = _frozen_revision(session, step, automation.identity_id, default_from)
            step.revision_id = revision.id
            ledger.reassign_revision(session, step.id, revision.id, now)
    for step in (s for s in existing if s not in matched):
        step.removed_at = now
        ledger.skip_pending(session, AutomationMessage.__table__.c.step_id == step.id,
                            STEP_REMOVED, now)
