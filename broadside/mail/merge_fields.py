"""Per-recipient merge fields: a small, sandboxed subset of Jinja.

An owner writes `{{ name or "friend" }}`, `{{ email }}`, `{{ attributes.city }}` or
`{% if attributes.vip %}...{% endif %}` in a subject or body. Those expressions run in a
`jinja2.sandbox.SandboxedEnvironment` with no globals, a short list of filters (no `safe`,
so a value can never bypass HTML escaping) and only `if` blocks, so a body can never reach the
server's internals, load another template or turn autoescaping off. Problems are found when the
content is frozen (a clear ValidationError naming the line), not per recipient.

`split_merge_fields` cuts user text into literal text and merge fields, so the literal text can
go through Markdown, the sanitiser and the layout while each field travels as an opaque
placeholder; `jinja_literal` makes any text safe to embed in a template as plain data.

The bounds that keep a merge field from exhausting memory or CPU live in
`broadside.mail.merge_sandbox`, whose environment compiles and renders every template here.
"""

from __future__ import annotations

import re
from typing import Any

from jinja2 import Template, TemplateError, TemplateSyntaxError, nodes

from broadside.core.errors import ValidationError
from broadside.mail.merge_check import syntax_problem
from broadside.mail.merge_limits import MAX_NESTING
from broadside.mail.merge_sandbox import (
    ALLOWED_FILTERS,
    ALLOWED_NODES,
    REFUSED_METHODS,
    TEXT_ENV,
    MergeEnvironment,
)


class MergeError(ValidationError):
    """Merge fields that cannot be rendered (bad syntax, forbidden construct, runtime error).

    A syntax error knows its line and column (from 1), so a page can point at it."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None
                 ) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


_TAG_NAMES = {nodes.For: "for", nodes.Assign: "set", nodes.AssignBlock: "set",
              nodes.Macro: "macro", nodes.CallBlock: "call", nodes.FilterBlock: "filter",
              nodes.Include: "include", nodes.Extends: "extends", nodes.Import: "import",
              nodes.FromImport: "from", nodes.Block: "block", nodes.With: "with",
              nodes.Scope: "autoescape", nodes.ScopedEvalContextModifier: "autoescape",
              nodes.Pow: "**"}


def _too_deep(where: str, lineno: int | None = None) -> MergeError:
    line = f" on line {lineno}" if lineno else ""
    return MergeError(f"The {where} has merge fields nested too deeply{line} (at most "
                      f"{MAX_NESTING} levels of brackets, operators, filters and ifs).")


def _nodes_with_depth(tree: nodes.Node) -> Any:
    """Every node of `tree` with its depth, without recursion (Jinja's find_all recurses)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())


def check_merge_fields(source: str, where: str) -> nodes.Template:
    """Raise MergeError (naming `where` and the line) unless `source` is allowed merge syntax;
    the parsed tree when it is."""
    try:
        tree = TEXT_ENV.parse(source)
    except TemplateSyntaxError as exc:
        # Where the mistake is, not where Jinja's parser gave up (merge_check.scan).
        line, column, problem = syntax_problem(source, exc)
        raise MergeError(f"The {where} has a merge-field error on line {line}, column "
                         f"{column}: {problem} Fields look like {{{{ name }}}}.",
                         line=line, column=column) from None
    except RecursionError:
        raise _too_deep(where) from None
    for node, depth in _nodes_with_depth(tree):
        lineno = getattr(node, "lineno", 1)
        if depth > MAX_NESTING:
            raise _too_deep(where, lineno)
        if not isinstance(node, ALLOWED_NODES):
            what = _TAG_NAMES.get(type(node), type(node).__name__.lower())
            raise MergeError(f"The {where} uses '{what}' on line {lineno}; merge fields allow "
                             "only {{ … }} values and {% if %} … {% endif %} blocks.")
        name = None
        if isinstance(node, nodes.Getattr):
            name = node.attr
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            name = node.arg.value
        if isinstance(name, str) and name.startswith("_"):
            raise MergeError(f"The {where} uses '{name}' on line {lineno}; names that start "
                             "with an underscore are not available in merge fields.")
        if isinstance(node, nodes.Filter) and node.name not in ALLOWED_FILTERS:
            raise MergeError(f"The {where} uses the filter '{node.name}' on line {lineno}; "
                             f"available filters: {', '.join(sorted(ALLOWED_FILTERS))}.")
        # Found here too (not only when a recipient reaches it): `x.center(10**9)` in an if.
        if (isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr)
                and node.node.attr in REFUSED_METHODS):
            raise MergeError(f"The {where} uses {node.node.attr}() on line {lineno}; it is "
                             "not available in merge fields.")
    return tree


class Placeholders:
    """Mints placeholder tokens that Markdown, nh3, css-inline and the plain-text
    writer (broadside.mail.plain_text) leave alone.

    Letters and digits only, with a random nonce, so no real text collides with them and
    they survive URL percent-encoding inside links.
    """

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        self.fields: dict[str, str] = {}
        self.pattern = re.compile(rf"bsm{nonce}[vb]\d+z")

    def add(self, source: str, *, block: bool) -> str:
        token = f"bsm{self.nonce}{'b' if block else 'v'}{len(self.fields)}z"
        self.fields[token] = source
        return token


def split_merge_fields(source: str, placeholders: Placeholders) -> str:
    """`source` with each {{ … }} / {% … %} replaced by a placeholder; comments dropped.

    Text inside {% raw %} … {% endraw %} stays literal text. Call check_merge_fields first.
    """
    out: list[str] = []
    current: list[str] | None = None
    kind = ""
    for _, token_type, value in TEXT_ENV.lex(source):
        if token_type in ("variable_begin", "block_begin"):
            current, kind = [], token_type
        elif token_type in ("variable_end", "block_end"):
            inner = "".join(current or []).strip()
            if kind == "variable_begin":
                out.append(placeholders.add("{{ " + inner + " }}", block=False))
            else:
                out.append(placeholders.add("{% " + inner + " %}", block=True))
            current = None
        elif current is not None:
            current.append(value)
        elif token_type == "data":
            out.append(value)
        # comment_begin/comment/comment_end and raw_begin/raw_end produce nothing
    return "".join(out)


def jinja_literal(text: str) -> str:
    """`text` as template source that renders exactly `text`.

    Every "{" becomes a constant expression, so no delimiter can start in literal text, not
    even right before a merge field that follows. Jinja folds constants at compile time, so
    this costs nothing per recipient.
    """
    return text.replace("{", "{{ '{' }}")


def join_template(text_with_placeholders: str, placeholders: Placeholders) -> str:
    """Turn text holding placeholders back into a template: literal parts escaped, fields in."""
    parts: list[str] = []
    position = 0
    for match in placeholders.pattern.finditer(text_with_placeholders):
        parts.append(jinja_literal(text_with_placeholders[position:match.start()]))
        parts.append(placeholders.fields[match.group(0)])
        position = match.end()
    parts.append(jinja_literal(text_with_placeholders[position:]))
    return "".join(parts)


def compile_template(env: MergeEnvironment, source: str, where: str) -> Template:
    try:
        return env.from_string(source)
    except TemplateError as exc:
        raise MergeError(f"The {where} could not be prepared: {exc}") from None
    except (RecursionError, SyntaxError, MemoryError):
        raise _too_deep(where) from None
