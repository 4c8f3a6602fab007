"""One submission of the segment form as a whole: which rules it means, and what the builder
shows next.

The builder's fields and the "Edit as JSON" box travel together, and saving uses whichever
the owner changed last. With JavaScript the page says which (`rules_source`: "builder" or
"json", set as the owner types, and said beside the Save button) and keeps the box showing the
builder's rules until the owner edits the box. Without it (`rules_source` empty) the box wins
when it is non-empty and not the JSON the page showed (`rules_json_shown`), compared as JSON so
that re-indenting changes nothing. An empty box always leaves the builder in charge. A box that
is not JSON is refused with where it broke, and kept as typed. The add and remove buttons work
on the builder's fields; an edited box that is still in charge is kept, open, until it is
saved, loaded or emptied.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from webapp.segments import builder

MAX_JSON = 100_000


def _parse_json(text: str) -> tuple[Any, str | None]:
    if len(text) > MAX_JSON:
        return None, f"The JSON can be at most {MAX_JSON:,} characters."
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, (f"The JSON could not be read: {exc.msg} (line {exc.lineno}, "
                      f"column {exc.colno}).")
    except RecursionError:
        return None, "The JSON is nested too deeply."


def _same_json(value: Any, shown_text: str) -> bool:
    shown, problem = _parse_json(shown_text)
    if problem:
        return False
    try:
        return bool(value == shown)
    except RecursionError:
        return False


@dataclasses.dataclass
class Posted:
    """What one submission of the builder form says."""

    tree: builder.Box  # the builder's fields, as posted
    json_text: str = ""
    json_changed: bool = False  # the JSON box is non-empty and not what the page showed
    json_value: Any = None
    problem: str | None = None  # the JSON box or the fields could not be read

    @property
    def rules(self) -> Any:
        """What to validate and save: the JSON box when it was changed, else the builder."""
        return self.json_value if self.json_changed else builder.to_rules(self.tree)

    def shown_tree(self) -> builder.Box:
        """The tree to show again: the changed JSON when the builder can show it."""
        if self.json_changed and not self.problem:
            try:
                return builder.from_rules(self.json_value)
            except builder.BuilderError:
                pass
        return self.tree


def read_form(form: Mapping[str, str]) -> Posted:
    try:
        tree = builder.from_form(form)
    except builder.BuilderError as exc:
        return Posted(builder.starting_tree(), problem=exc.message)
    text = form.get("rules_json") or ""
    source = form.get("rules_source") or ""
    if not text.strip() or source == "builder":
        return Posted(tree, text)
    value, problem = _parse_json(text)
    changed = (source == "json" or bool(problem)
               or not _same_json(value, form.get("rules_json_shown") or ""))
    return Posted(tree, text, changed, value, problem if changed else None)


@dataclasses.dataclass
class Shown:
    """What the builder shows: the tree, the JSON box, and a notice or focus after a button.
    `json_edited`: the box holds the owner's edit, which saving will use."""

    tree: builder.Box
    json_text: str
    json_shown: str
    json_edited: bool = False
    json_error: str | None = None
    notice: str | None = None
    focus: str | None = None


def shown(tree: builder.Box, posted: Posted | None = None, *, notice: str | None = None,
          focus: str | None = None) -> Shown:
    """The builder for `tree`; a changed JSON box (`posted`) is kept as typed, open."""
    current = builder.dumps(builder.to_rules(tree))
    if posted is not None and posted.json_changed:
        return Shown(tree, posted.json_text, current, True, posted.problem, notice, focus)
    return Shown(tree, current, current, notice=notice, focus=focus)


def builder_json(form: Mapping[str, str]) -> str:
    """The rules the posted builder fields hold, as the JSON box shows them (the box follows
    the builder as the owner changes it). Raises BuilderError for fields it cannot read."""
    return builder.dumps(builder.to_rules(builder.from_form(form)))


def press(posted: Posted, action: str) -> Shown:
    """A builder button other than Save and Preview: the builder to show next."""
    if action == "load-json":
        if not posted.json_text.strip():
            return shown(posted.tree, posted, notice="The JSON box is empty.")
        value, problem = _parse_json(posted.json_text)
        if problem:
            return shown(posted.tree, posted, notice=problem)
        try:
            return shown(builder.from_rules(value), notice="The JSON is in the builder now.")
        except builder.BuilderError as exc:
            return shown(posted.tree, posted, notice=exc.message)
    tree = posted.tree
    focus, notice = builder.apply_action(tree, action)
    return shown(tree, posted, notice=notice, focus=focus)
