"""What an automation's merge fields will do to the people it reaches, told in its editor (as
typed, and after each save) and when it is enabled: the broadcast editor's report
(`broadside/campaigns/field_report.py`) over every step's subject, preheader and body, named
"step 2 body", in one count.

Who it reaches is known only for people already there: the trigger list's active members, or
the people its segment matches now (`broadcasts.audience.reached`, as a broadcast to that list
or segment would); new joiners are like them. At most EDITOR_CHECKED of them are counted, so
the answer is as quick for a million people as for a hundred.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from broadside.campaigns.automations.service import get_automation, steps_of
from broadside.campaigns.broadcasts.audience import reached
from broadside.campaigns.content.bodies import checked_body_of
from broadside.campaigns.field_report import EDITOR_CHECKED, MergeReport, field_report

ON_LIST = "list"  # field_report's names for the people counted
IN_SEGMENT = "segment"


@dataclass(frozen=True)
class StepTexts:
    subject: str
    preheader: str
    body: str
    codes: bool = False  # the step mints a code per recipient: `{{ code }}` is a field
    text: str | None = None  # the owner's own plain-text part (None: made from the body)


def steps_report(session: Session, steps: Sequence[StepTexts], *, list_id: int | None,
                 segment_id: int | None, limit: int = EDITOR_CHECKED) -> MergeReport:
    """The steps' merge fields checked against the trigger's people: `segment_id` for a
    lifecycle campaign, else `list_id` (None for both: nobody is counted, a field that is no
    field is still told)."""
    texts: dict[str, str] = {}
    coded: set[str] = set()
    for number, step in enumerate(steps, start=1):
        these = {f"step {number} subject": step.subject,
                 f"step {number} preheader": step.preheader,
                 f"step {number} body": step.body}
        if step.text is not None:
            these[f"step {number} plain-text part"] = step.text
        texts |= these
        if step.codes:
            coded |= set(these)
    condition = reached(session, None if segment_id is not None else list_id, segment_id)
    return field_report(session, texts, condition, limit=limit,
                        noun=IN_SEGMENT if segment_id is not None else ON_LIST,
                        codes=frozenset(coded))


def automation_report(session: Session, automation_id: int) -> MergeReport:
    """The saved automation's report (its live steps, its trigger)."""
    automation = get_automation(session, automation_id)
    segment_id = automation.segment_id if automation.trigger_type == "segment" else None
    # Each body as its freeze reads it (`body_of`: in its format, blocks expanded).
    steps = [StepTexts(s.subject, s.preheader, checked_body_of(session, s).body, s.codes_prefix is not None,
                       s.text_body)
             for s in steps_of(session, automation_id)]
    return steps_report(session, steps, list_id=automation.list_id, segment_id=segment_id)
