"""Where a merge-field mistake really is, and what a subject or body's merge fields refer to.

Jinja reports a syntax error where its parser gave up, which is often far from the mistake:
`Hi {{ name,` on line 1 followed by `{% if … %}` on line 3 is "unexpected '%'" on line 3. So
before Jinja's own message is used, `scan` walks the delimiters itself (`{{ }}`, `{% %}`,
`{# #}`, quotes inside a tag, `{% raw %}`) and names the opener that is never closed, closed
by the wrong closer, or cut by a blank line; then the `{% if %}` / `{% endif %}` pairs. Only
when both find nothing is Jinja's message kept, placed at the tag it happened in (its exact
character when Jinja gives one). Lines and columns count from 1, columns in characters.

`field_uses` reads a valid template's tree and lists each field it uses: a built-in (`name`,
`email`, `unsubscribe_url`), an attribute (`attributes.city`, `attributes["city"]`,
`attributes.get("city")`), or a name nobody has (`{{ nmae }}`, which renders empty), with
whether it is printed without a fallback (`or "…"`, `| default(…)`, or inside an `{% if %}`
on the same field). `suggest` finds the closest known field. No database here: who lacks an
attribute is counted by `broadside.campaigns.broadcasts.merge_report`.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from jinja2 import TemplateSyntaxError, nodes

from broadside.mail.merge_sandbox import TEXT_ENV

BUILT_INS = ("name", "email", "unsubscribe_url")
ATTRIBUTES = "attributes"
# Dict methods a field may call on `attributes`; `attributes.get` is not an attribute named "get".
_DICT_METHODS = frozenset({"get", "items", "keys", "values", "copy"})
_FALLBACK_FILTERS = frozenset({"default", "d"})

_OPENERS = {"{{": "}}", "{%": "%}", "{#": "#}"}
_OUTSIDE = re.compile(r"\{\{|\{%|\{#|\}\}|%\}")
_INSIDE = re.compile(r"['\"]|\{\{|\{%|\{#|\}\}|%\}|\n[ \t]*\r?\n")
# A quoted text inside a tag, as Jinja reads it, but never across a blank line: a quote left
# open is then reported where it starts rather than closed by an apostrophe paragraphs later.
_STRING = {quote: re.compile(rf"{quote}([^{quote}\\\n]|\\.|\n(?![ \t]*\r?\n))*{quote}", re.S)
           for quote in "'\""}
_ENDRAW = re.compile(r"\{%[-+]?\s*endraw\s*[-+]?%\}")
_CHAR_AT = re.compile(r"unexpected char (.+) at (\d+)$")


def position(source: str, offset: int) -> tuple[int, int]:
    """(line, column) of a character offset, both from 1."""
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


@dataclass(frozen=True)
class Tag:
    kind: str  # "{{" or "{%" ("{#" comments are skipped)
    start: int  # offset of the opener
    end: int  # offset just after the closer

    def inner(self, source: str) -> str:
        return source[self.start + 2:self.end - 2].strip("-+ \t\r\n")


@dataclass(frozen=True)
class Scan:
    tags: list[Tag]
    problem: tuple[int, str] | None  # (offset, message): the first delimiter mistake
    strays: list[int]  # offsets of a `}}` or `%}` that closes nothing (Jinja prints it as text)


def scan(source: str) -> Scan:
    """The tags of `source` by their delimiters, and the first mistake in them."""
    tags: list[Tag] = []
    strays: list[int] = []
    i = 0
    while True:
        match = _OUTSIDE.search(source, i)
        if match is None:
            return Scan(tags, None, strays)
        token, start = match.group(), match.start()
        if token in ("}}", "%}"):
            strays.append(start)
            i = match.end()
            continue
        closer = _OPENERS[token]
        if token == "{#":
            end = source.find("#}", match.end())
            if end < 0:
                return Scan(tags, (start, "this {# comment #} is never closed with #}."), strays)
            i = end + 2
            continue
        i = match.end()
        while True:
            inside = _INSIDE.search(source, i)
            if inside is None:
                return Scan(tags, (start, f"this {token} is never closed: add {closer} after "
                                          "the field."), strays)
            found = inside.group()
            if found in _STRING:
                string = _STRING[found].match(source, inside.start())
                if string is None:
                    return Scan(tags, (inside.start(), f"this {found} starts a text that is "
                                                       f"never closed with {found}."), strays)
                i = string.end()
                continue
            if found == closer:
                tag = Tag(token, start, inside.end())
                tags.append(tag)
                i = inside.end()
                if token == "{%" and tag.inner(source) == "raw":
                    endraw = _ENDRAW.search(source, i)
                    if endraw is None:
                        return Scan(tags, (start, "this {% raw %} is never closed with "
                                                  "{% endraw %}."), strays)
                    i = endraw.end()
                break
            if found in ("}}", "%}"):
                return Scan(tags, (start, f"this {token} is closed with {found}; close it with "
                                          f"{closer}."), strays)
            if found in _OPENERS:
                line, column = position(source, inside.start())
                return Scan(tags, (start, f"this {token} is never closed: add {closer} before "
                                          f"the {found} on line {line}, column {column}."),
                            strays)
            line, _ = position(source, inside.end() - 1)
            return Scan(tags, (start, f"this {token} is never closed: add {closer} before the "
                                      f"blank line (line {line})."), strays)


def _block_problem(source: str, tags: list[Tag]) -> tuple[int, str] | None:
    """The first `{% if %}` never closed, or `{% elif/else/endif %}` that belongs to none."""
    opened: list[tuple[Tag, bool]] = []  # each open if, and whether its else was seen
    for tag in tags:
        if tag.kind != "{%":
            continue
        word = (tag.inner(source).split() or [""])[0]
        if word == "if":
            opened.append((tag, False))
        elif word in ("elif", "else", "endif") and not opened:
            return tag.start, f"this {{% {word} %}} has no {{% if %}} before it."
        elif word in ("elif", "else") and opened[-1][1]:
            return tag.start, f"this {{% {word} %}} comes after the {{% else %}} of its if."
        elif word == "else":
            opened[-1] = (opened[-1][0], True)
        elif word == "endif":
            opened.pop()
    if opened:
        return opened[-1][0].start, "this {% if %} is never closed: add {% endif %} after it."
    return None


class _Lines:
    """Offsets <-> lines of one text, by bisection (a big body has thousands of fields)."""

    def __init__(self, source: str) -> None:
        self.starts = [0, *(match.end() for match in re.finditer(r"\n", source))]
        self.length = len(source)

    def span(self, line: int) -> tuple[int, int]:
        """[start, end) offsets of a line, from 1."""
        end = self.starts[line] if line < len(self.starts) else self.length
        return self.starts[min(line, len(self.starts)) - 1], end

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def column(self, offset: int) -> int:
        return offset - self.starts[bisect.bisect_right(self.starts, offset) - 1] + 1


def syntax_problem(source: str, error: TemplateSyntaxError) -> tuple[int, int, str]:
    """(line, column, message) for the mistake behind Jinja's `error` in `source`."""
    found = scan(source)
    problem = found.problem or _block_problem(source, found.tags)
    if problem is not None:
        offset, message = problem
        return (*position(source, offset), message[0].upper() + message[1:])
    said = (error.message or "unexpected text").rstrip(".")
    char = _CHAR_AT.search(said)
    if char is not None and int(char.group(2)) < len(source):
        return (*position(source, int(char.group(2))), f"Unexpected character {char.group(1)}.")
    # Jinja's line; the column of the tag that holds it (the last one starting on or before it).
    lineno = error.lineno or 1
    column = 1
    lines = _Lines(source)
    line_start, line_end = lines.span(min(lineno, len(lines.starts)))
    for tag in found.tags:
        if tag.start >= line_end:
            break
        if tag.end > line_start:
            lineno, column = lines.line(tag.start), lines.column(tag.start)
    return lineno, column, said[0].upper() + said[1:] + "."


# ---------------------------------------------------------------- what the fields refer to

@dataclass(frozen=True)
class Use:
    """One field in a valid template."""

    kind: str  # "builtin", "attribute" or "unknown"
    key: str  # "name", "city" (for attributes.city) or "nmae"
    line: int
    column: int | None
    printed_bare: bool  # printed with no fallback and no {% if %} on it: empty when missing

    @property
    def written(self) -> str:
        return attribute_field(self.key) if self.kind == "attribute" else self.key


def attribute_field(key: str) -> str:
    """How a field names an attribute: attributes.city, or attributes["first name"]."""
    return f"attributes.{key}" if key.isidentifier() else f'attributes["{key}"]'


def _attribute_key(node: nodes.Node) -> str | None:
    """"city" for attributes.city / attributes["city"], else None."""
    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) \
            and node.node.name == ATTRIBUTES and node.attr not in _DICT_METHODS:
        return node.attr
    if isinstance(node, nodes.Getitem) and isinstance(node.node, nodes.Name) \
            and node.node.name == ATTRIBUTES and isinstance(node.arg, nodes.Const) \
            and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def _get_call(node: nodes.Node) -> tuple[str, bool] | None:
    """("city", has_default) for attributes.get("city"[, default])."""
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr) \
            and node.node.attr == "get" and isinstance(node.node.node, nodes.Name) \
            and node.node.node.name == ATTRIBUTES and node.args \
            and isinstance(node.args[0], nodes.Const) and isinstance(node.args[0].value, str):
        return node.args[0].value, len(node.args) > 1 or bool(node.kwargs)
    return None


def _tested(node: nodes.Node) -> set[str]:
    """The fields a test looks at ("attributes.city", "name"): inside it they are not empty."""
    found: set[str] = set()
    for child in [node, *node.find_all((nodes.Getattr, nodes.Getitem, nodes.Name, nodes.Call))]:
        key = _attribute_key(child) or (_get_call(child) or (None,))[0]
        if key is not None:
            found.add(f"attributes.{key}")
        elif isinstance(child, nodes.Name):
            found.add(child.name)
    return found


class _Walker:
    def __init__(self) -> None:
        self.uses: list[tuple[str, str, int, bool]] = []

    def walk(self, node: nodes.Node, *, bare: bool, guarded: frozenset[str]) -> None:
        """`bare`: a value here would be printed as it is (not a test, no fallback around it).
        The tree's depth is bounded (check_merge_fields ran first), so recursion is safe."""
        key = _attribute_key(node)
        if key is not None:
            self.uses.append(("attribute", key, node.lineno,
                              bare and f"attributes.{key}" not in guarded))
            return
        get = _get_call(node)
        if get is not None:
            self.uses.append(("attribute", get[0], node.lineno,
                              bare and not get[1] and f"attributes.{get[0]}" not in guarded))
            for arg in node.args[1:]:  # type: ignore[attr-defined]
                self.walk(arg, bare=bare, guarded=guarded)
            return
        if isinstance(node, nodes.Name):
            if node.name in BUILT_INS:
                self.uses.append(("builtin", node.name, node.lineno,
                                  bare and node.name not in guarded))
            elif node.name != ATTRIBUTES:
                self.uses.append(("unknown", node.name, node.lineno, bare))
            return
        if isinstance(node, nodes.If):
            self.walk(node.test, bare=False, guarded=guarded)
            inside = guarded | _tested(node.test)
            for child in node.body:
                self.walk(child, bare=bare, guarded=inside)
            for elif_ in node.elif_:
                self.walk(elif_, bare=bare, guarded=guarded)
            for child in node.else_:
                self.walk(child, bare=bare, guarded=guarded)
            return
        if isinstance(node, nodes.CondExpr):
            self.walk(node.test, bare=False, guarded=guarded)
            self.walk(node.expr1, bare=bare, guarded=guarded | _tested(node.test))
            if node.expr2 is not None:
                self.walk(node.expr2, bare=bare, guarded=guarded)
            return
        if isinstance(node, nodes.Or):
            self.walk(node.left, bare=False, guarded=guarded)
            self.walk(node.right, bare=bare, guarded=guarded)
            return
        if isinstance(node, nodes.Filter) and node.name in _FALLBACK_FILTERS:
            if node.node is not None:
                self.walk(node.node, bare=False, guarded=guarded)
            for arg in node.args:
                self.walk(arg, bare=bare, guarded=guarded)
            return
        if isinstance(node, nodes.Test):
            bare = False
        for child in node.iter_child_nodes():
            self.walk(child, bare=bare, guarded=guarded)


def field_uses(source: str, tree: nodes.Template | None = None) -> list[Use]:
    """Every field `source` uses, in order. `source` must have passed check_merge_fields
    (which returns its `tree`)."""
    walker = _Walker()
    walker.walk(tree or TEXT_ENV.parse(source), bare=True, guarded=frozenset())
    tags = scan(source).tags
    ends = [tag.end for tag in tags]
    lines = _Lines(source)
    uses: list[Use] = []
    seen: dict[str, int] = {}  # word -> offset just past its last hit: the next use is later
    for kind, key, line, bare in walker.uses:
        # The tree has lines only: the word's first occurrence in a tag on that line, past
        # the previous use of the same word.
        start, end = lines.span(line)
        low = max(start, seen.get(key, 0))
        pattern = re.compile(rf"(?<!\w){re.escape(key)}(?!\w)")
        column = None
        for tag in tags[bisect.bisect_right(ends, low):]:
            if tag.start >= end:
                break
            hit = pattern.search(source, max(tag.start, low), min(tag.end, end))
            if hit is not None:
                seen[key] = hit.end()
                column = lines.column(hit.start())
                break
        uses.append(Use(kind, key, line, column, bare))
    return uses


def stray_closers(source: str) -> Iterator[tuple[int, int, str]]:
    """(line, column, "}}") for each closer outside any tag: Jinja prints it as text, and it
    is almost always half of a field (`{ name }}`, `name }}`)."""
    for offset in scan(source).strays:
        yield (*position(source, offset), source[offset:offset + 2])


def suggest(word: str, candidates: list[str]) -> str | None:
    """The known field closest to `word` (case-insensitive), if one is close enough."""
    lowered = {candidate.lower(): candidate for candidate in candidates}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None
