"""The automation editor's form <-> the API's JSON shape (`broadside.campaigns.automations.service.
parse_input` validates it; this module only reads and lays out what was typed).

The form is plain HTML that works without JavaScript: the steps are `step-<n>-delay-amount`
and `step-<n>-delay-unit` (a number and minutes, hours, days or weeks, as every other tool
asks for a delay), `step-<n>-subject`, `step-<n>-preheader` and `step-<n>-body`; "Add a step"
and "Remove step n" are submit buttons (`action=add` / `action=remove-<n>`) that re-render the
form with every typed value kept and save nothing. Only `action=save` saves.

The API's delay is ISO 8601 (`durations`); the form writes it from the number and the unit.
A saved delay is shown in the largest unit it is a whole number of (PT1H30M: 90 minutes;
seconds only for a delay that is not whole minutes, which only the API can write), and it is
posted back beside them as `step-<n>-delay`: when the number and unit still say as many
seconds, that text is kept as it was, so an untouched step saves exactly what it had.
A post with `step-<n>-delay` alone (no number) is read as ISO 8601, as the API reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from werkzeug.datastructures import MultiDict

from broadside.campaigns.automations.durations import MAX_DAYS, parse_duration
from broadside.campaigns.automations.service import MAX_STEPS, AutomationInput, parse_input
from broadside.core.errors import ValidationError
from broadside.core.i18n import _, _l
from broadside.mail.body_formats import EDITORS, written_as
from webapp.compose.languages import posted_versions

MAX_FIELD = 600_000  # longer than any valid value: the domain says what is too long
# ASCII digits only: `\d` and str.isdigit() also accept "٣" and "²", and int("²") raises.
_STEP_KEY = re.compile(
    r"^step-([0-9]{1,2})-(delay|delay-amount|subject|preheader|body|codes|codes-prefix|text|"
    r"text-mode)$")
_REMOVE = re.compile(r"^remove-([0-9]{1,2})$")
_ADD_VERSION = re.compile(r"^add-version-([0-9]{1,2})$")
_WHOLE = re.compile(r"-?[0-9]{1,12}")
_ID = re.compile(r"[0-9]{1,9}")
_AMOUNT = re.compile(r"[0-9]{1,7}")
# The form's units, largest first; "seconds" is offered only to show a delay that needs it.
UNITS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60}
UNIT_WORDS = {"weeks": _l("weeks"), "days": _l("days"), "hours": _l("hours"),
              "minutes": _l("minutes"), "seconds": _l("seconds")}
_ISO = {"weeks": "P{}W", "days": "P{}D", "hours": "PT{}H", "minutes": "PT{}M", "seconds": "PT{}S"}


def in_one_unit(seconds: int) -> tuple[str, str]:
    """(number, unit) in the largest unit `seconds` is a whole number of: 5400 -> ("90",
    "minutes"), 0 -> ("0", "minutes"), 90 -> ("90", "seconds")."""
    if seconds == 0:
        return "0", "minutes"
    for unit, size in UNITS.items():
        if seconds % size == 0:
            return str(seconds // size), unit
    return str(seconds), "seconds"


@dataclass
class StepFields:
    delay: str = "PT0S"  # ISO 8601, what the API gets
    subject: str = ""
    preheader: str = ""
    body: str = ""
    id: int | None = None  # the saved step in this place, for its preview and test send
    delay_amount: str = ""  # the form's number and unit, as typed (or shown for `delay`)
    delay_unit: str = "minutes"
    delay_error: str | None = None  # a refusal of the number and unit, shown under them
    codes: bool = False  # "Mint a code per recipient"
    codes_prefix: str = ""  # its prefix, as typed
    text_body: str | None = None  # the plain-text part as written; None: made from the body
    attachment_ids: list[int] = field(default_factory=list)  # its files, in order
    editor: str = "markdown"  # the compose mode: templates/automations/_step_body.html
    # Its versions in other languages as typed (webapp/compose/languages.py); None: not on the
    # page (then none are sent, as the API's left-out `versions`).
    versions: list[dict[str, str]] | None = None
    adding_version: bool = False  # "Add a version" pressed: the new version's fields shown

    def __post_init__(self) -> None:
        if not self.delay_amount:
            self.delay_amount, self.delay_unit = _shown(self.delay)


@dataclass
class EditorFields:
    name: str = ""
    trigger_type: str = "joined_list"
    list_id: str = ""
    segment_id: str = ""
    every_hours: str = "12"
    priority: str = "0"
    record_only: bool = False
    identity_id: str = ""  # the sending identity ("": the default)
    steps: list[StepFields] = field(default_factory=lambda: [StepFields()])
    # A feed trigger: its address, whom its items go to ("list:<id>" or "segment:<id>"),
    # one email per item or a digest (daily or weekly on a weekday, 0 = Monday, at a time).
    feed_url: str = ""
    feed_target: str = ""
    feed_mode: str = "each"
    feed_every: str = "daily"
    feed_at: str = "08:00"
    feed_weekday: str = "0"


def _shown(delay: str) -> tuple[str, str]:
    """A saved ISO delay as the form's number and unit (an unreadable one as it was written,
    which the refusal under it explains)."""
    try:
        return in_one_unit(parse_duration(delay))
    except ValidationError:
        return delay, "days"


def _delay(number: int, amount: str, unit: str, saved: str) -> tuple[str, str | None]:
    """(ISO 8601 delay, refusal) from the number and unit typed for step `number`."""
    amount = amount.strip()
    size = UNITS.get(unit) or (1 if unit == "seconds" else None)
    if size is None:
        return saved, _("Step %(n)s: choose the delay's unit: minutes, hours, days or weeks.",
                        n=number)
    if not _AMOUNT.fullmatch(amount):
        return saved, _("Step %(n)s: give the delay as a whole number of %(unit)s, such as 3 "
                        "(0 sends it at once).", n=number, unit=UNIT_WORDS.get(unit, unit))
    seconds = int(amount) * size
    if seconds > MAX_DAYS * 86400:
        return saved, _("Step %(n)s: a delay is at most %(days)s days (%(weeks)s weeks).",
                        n=number, days=MAX_DAYS, weeks=MAX_DAYS // 7)
    try:
        if parse_duration(saved) == seconds:
            return saved, None  # unchanged: the delay as it was written, to the letter
    except ValidationError:
        pass
    return _ISO[unit].format(int(amount)), None


def _text(form: MultiDict, key: str, default: str = "") -> str:
    value = form.get(key, default)
    return value[:MAX_FIELD] if isinstance(value, str) else default


def read_form(form: MultiDict) -> EditorFields:
    """Whatever was typed, as text, in step order (gaps in the numbering closed up)."""
    fields = EditorFields(
        name=_text(form, "name"), trigger_type=_text(form, "trigger_type", "joined_list"),
        list_id=_text(form, "list_id"), segment_id=_text(form, "segment_id"),
        every_hours=_text(form, "every_hours", "12"), priority=_text(form, "priority", "0"),
        record_only=form.get("record_only") in ("1", "on", "y", "true"),
        identity_id=_text(form, "identity_id"), steps=[],
        **{key: _text(form, key, default)[:2100] for key, default in FEED_DEFAULTS.items()})
    numbers = sorted({int(m.group(1)) for key in form if (m := _STEP_KEY.match(key))})
    for number in numbers[:MAX_STEPS + 1]:
        step_id = _text(form, f"step-{number}-id")
        delay, error = _text(form, f"step-{number}-delay", "PT0S"), None
        amount, unit = _text(form, f"step-{number}-delay-amount")[:40], ""
        if f"step-{number}-delay-amount" in form:
            unit = _text(form, f"step-{number}-delay-unit", "days")[:20]
            delay, error = _delay(len(fields.steps) + 1, amount, unit, delay)
        fields.steps.append(StepFields(
            delay=delay, delay_amount=amount, delay_unit=unit or "minutes", delay_error=error,
            subject=_text(form, f"step-{number}-subject"),
            preheader=_text(form, f"step-{number}-preheader"),
            # Browsers post a textarea's line breaks as CRLF: kept so, an unchanged body
            # (say, one written through the API) read as changed and froze a new revision.
            body=_text(form, f"step-{number}-body").replace("\r\n", "\n"),
            id=int(step_id) if _ID.fullmatch(step_id) else None,
            codes=form.get(f"step-{number}-codes") in ("1", "on", "y", "true"),
            codes_prefix=_text(form, f"step-{number}-codes-prefix")[:40],
            text_body=(_text(form, f"step-{number}-text").replace("\r\n", "\n") or None
                       if form.get(f"step-{number}-text-mode") == "own" else None),
            attachment_ids=[int(v) for v in form.getlist(f"step-{number}-attachment")
                            if _ID.fullmatch(v)],
            editor=_text(form, f"step-{number}-editor", "markdown")[:20],
            versions=posted_versions(form, f"step-{number}-version"),
        ))
    return fields


def delay_refusal(fields: EditorFields) -> str | None:
    """The first step's number and unit that say no delay (shown under them), if any."""
    return next((s.delay_error for s in fields.steps if s.delay_error), None)


def apply_button(fields: EditorFields, action: str) -> str | None:
    """Carry out "add", "remove-<n>" or "add-version-<n>" on the fields; returns a note to
    show, if any."""
    if action == "add":
        if len(fields.steps) >= MAX_STEPS:
            return _("An automation has at most %(n)s steps.", n=MAX_STEPS)
        fields.steps.append(StepFields(delay="P1D"))
        return None
    adding = _ADD_VERSION.match(action)
    if adding and 0 < int(adding.group(1)) <= len(fields.steps):
        fields.steps[int(adding.group(1)) - 1].adding_version = True
        return None
    match = _REMOVE.match(action)
    if match:
        index = int(match.group(1)) - 1
        if 0 <= index < len(fields.steps):
            del fields.steps[index]
    return None


# How the domain names a step in its refusals: "Step 2: the delay ...", "the subject of step 2".
_NAMED_STEP = re.compile(r"^(?:Step|Schritt|Étape|Paso) ([0-9]{1,2})\b|\bof step ([0-9]{1,2})\b")


_FIELD_STEP = re.compile(r"^steps\[([0-9]{1,2})\]")


def step_named(message: str | None, field: str | None = None) -> int | None:
    """The step a refusal is about (to mark it beside its fields), if it names one: by its
    field (`steps[1].versions`: step 2), else by its words."""
    by_field = _FIELD_STEP.match(field or "")
    if by_field:
        return int(by_field.group(1)) + 1
    match = _NAMED_STEP.search(message or "")
    return int(match.group(1) or match.group(2)) if match else None


def _number(text: str) -> Any:
    """A whole number when the text is one (the domain refuses anything else with a message)."""
    text = text.strip()
    return int(text) if _WHOLE.fullmatch(text) else text


FEED_DEFAULTS = {"feed_url": "", "feed_target": "", "feed_mode": "each", "feed_every": "daily",
                 "feed_at": "08:00", "feed_weekday": "0"}


def _feed_trigger(fields: EditorFields) -> dict[str, Any]:
    """The typed feed trigger in the API's shape (the domain says what is wrong with it)."""
    kind, _sep, chosen = fields.feed_target.partition(":")
    trigger: dict[str, Any] = {"type": "feed", "url": fields.feed_url, "mode": fields.feed_mode,
                               "segment_id" if kind == "segment" else "list_id":
                               _number(chosen) if chosen else None}
    if fields.feed_mode == "digest":
        trigger.update(every=fields.feed_every, at=fields.feed_at.strip())
        if fields.feed_every == "weekly":
            trigger["weekday"] = _number(fields.feed_weekday)
    return trigger


def as_body(fields: EditorFields) -> dict[str, Any]:
    """The API's JSON shape, for `parse_input`."""
    trigger: dict[str, Any]
    if fields.trigger_type == "feed":
        trigger = _feed_trigger(fields)
    elif fields.trigger_type == "segment":
        trigger = {"type": "segment", "segment_id": _number(fields.segment_id) if fields.segment_id else None,
                   "every_hours": _number(fields.every_hours or "12")}
    else:
        trigger = {"type": "joined_list", "list_id": _number(fields.list_id) if fields.list_id else None}
    return {
        "name": fields.name, "trigger": trigger, "priority": _number(fields.priority or "0"),
        "record_only": fields.record_only,
        "identity_id": _number(fields.identity_id) if fields.identity_id.strip() else None,
        "steps": [{"delay": s.delay, "subject": s.subject, "preheader": s.preheader, "body": s.body,
                   "format": EDITORS.get(s.editor, s.editor),
                   # Typed in any case: codes are capitals (the API itself takes them only so).
                   "codes": {"prefix": s.codes_prefix.strip().upper()} if s.codes else None,
                   "text": s.text_body,
                   "attachments": s.attachment_ids, "versions": s.versions,
                   **({"id": s.id} if s.id is not None else {})}
                  for s in fields.steps],
    }


def typed_body(step: StepFields) -> str:
    """A step's body as typed, as it would be saved (an HTML body's merge fields read back to
    what the owner typed: `body_formats.written_as`), for the merge check as the owner types."""
    return written_as(step.body, EDITORS.get(step.editor, "markdown"))


def parsed(fields: EditorFields) -> AutomationInput:
    """The typed automation, validated (`parse_input`), each step with its compose mode."""
    data = parse_input(as_body(fields))
    for step, typed in zip(data.steps, fields.steps, strict=True):
        step.editor = typed.editor  # checked against the format parse_input read from it
    return data


def from_saved(shape: dict[str, Any], step_ids: list[int],
               editors: list[str] | None = None) -> EditorFields:
    """A saved automation (`service.as_input`) laid out in the form, each step in its compose
    mode (`editors`; else the one its format is written in)."""
    trigger = shape["trigger"]
    modes = editors or [s.get("format", "markdown") for s in shape["steps"]]
    feed = {}
    if trigger["type"] == "feed":
        target = (f"segment:{trigger['segment_id']}" if trigger.get("segment_id")
                  else f"list:{trigger['list_id']}" if trigger.get("list_id") else "")
        feed = {"feed_url": trigger.get("url") or "", "feed_target": target,
                "feed_mode": trigger["mode"], "feed_every": trigger.get("every") or "daily",
                "feed_at": trigger.get("at") or "08:00",
                "feed_weekday": str(trigger.get("weekday") or 0)}
    return EditorFields(**feed,
        name=shape["name"], trigger_type=trigger["type"],
        list_id=str(trigger.get("list_id") or ""), segment_id=str(trigger.get("segment_id") or ""),
        every_hours=str(trigger.get("every_hours", 12)), priority=str(shape["priority"]),
        record_only=shape["record_only"], identity_id=str(shape.get("identity_id") or ""),
        steps=[StepFields(s["delay"], s["subject"], s["preheader"], s["body"], step_id,
                          codes=s["codes"] is not None,
                          codes_prefix=(s["codes"] or {}).get("prefix", ""), editor=mode,
                          text_body=s.get("text"),
                          attachment_ids=list(s.get("attachments") or []),
                          versions=list(s.get("versions") or []))
               for s, step_id, mode in zip(shape["steps"], step_ids, modes, strict=True)],
    )


def trigger_ids(fields: EditorFields) -> tuple[int | None, int | None]:
    """(list id, segment id) the typed trigger names, for the merge-field report (None where
    it names none, or nothing readable)."""
    kind = fields.trigger_type
    chosen = fields.segment_id if kind == "segment" else fields.list_id
    if kind == "feed":
        kind, _sep, chosen = fields.feed_target.partition(":")
    value = int(chosen) if _ID.fullmatch(chosen.strip()) else None
    return (None, value) if kind == "segment" else (value, None)
