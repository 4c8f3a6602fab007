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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jinja2 import TemplateError, TemplateSyntaxError, nodes
from jinja2.runtime import ChainableUndefined
from jinja2.sandbox import SandboxedEnvironment, SecurityError

from broadside.errors import ValidationError

# Filters a merge field may use. Everything else (safe, format, attr, map, tojson, center...)
# is absent: `safe` would let a subscriber's attribute inject raw HTML past the sanitiser.
ALLOWED_FILTERS = frozenset({
    "capitalize", "d", "default", "e", "escape", "first", "float", "int", "join", "last",
    "length", "lower", "replace", "round", "string", "title", "trim", "truncate", "upper",
    "urlencode", "wordcount",
})
# Jinja nodes a merge field may contain: expressions and `if` blocks, nothing that defines,
# loops, includes, imports or changes autoescaping.
ALLOWED_NODES = (
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.If, nodes.Name, nodes.Const,
    nodes.Getattr, nodes.Getitem, nodes.Slice, nodes.Filter, nodes.Test, nodes.CondExpr,
    nodes.And, nodes.Or, nodes.Not, nodes.Compare, nodes.Operand, nodes.Concat, nodes.Add,
    nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod, nodes.Neg, nodes.Pos,
    nodes.Call, nodes.Keyword, nodes.List, nodes.Tuple, nodes.Dict, nodes.Pair,
)
# String methods that can blow a short value up to any size.
_PADDING_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
MAX_REPEAT = 10_000


class MergeError(ValidationError):
    """Merge fields that cannot be rendered (bad syntax, forbidden construct, runtime error)."""


class _QuietUndefined(ChainableUndefined):
    """Unknown names, attributes and calls render as nothing; they never raise."""

    __slots__ = ()

    def _self(self, *args: Any, **kwargs: Any) -> _QuietUndefined:
        return self

    __call__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _self
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _self
    __neg__ = __pos__ = _self

    def _false(self, other: Any) -> bool:
        return False

    __lt__ = __le__ = __gt__ = __ge__ = _false

    def __int__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0


def _printable(value: Any) -> Any:
    # None and callables print as nothing: a method's repr would show a memory address.
    return "" if value is None or callable(value) else value


class MergeEnvironment(SandboxedEnvironment):
    intercepted_binops = frozenset({"*"})

    def __init__(self, *, autoescape: bool) -> None:
        super().__init__(
            autoescape=autoescape,
            undefined=_QuietUndefined,
            finalize=_printable,
            keep_trailing_newline=True,
            cache_size=0,
        )
        self.globals.clear()
        self.filters = {name: self.filters[name] for name in ALLOWED_FILTERS}

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(count, int):
                    if len(seq) * count > MAX_REPEAT:
                        raise SecurityError("that repetition is too long")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        if getattr(__obj, "__name__", "") in _PADDING_METHODS:
            raise SecurityError(f"{__obj.__name__}() is not available in merge fields")
        return super().call(__context, __obj, *args, **kwargs)


HTML_ENV = MergeEnvironment(autoescape=True)
TEXT_ENV = MergeEnvironment(autoescape=False)

_TAG_NAMES = {nodes.For: "for", nodes.Assign: "set", nodes.AssignBlock: "set",
              nodes.Macro: "macro", nodes.CallBlock: "call", nodes.FilterBlock: "filter",
              nodes.Include: "include", nodes.Extends: "extends", nodes.Import: "import",
              nodes.FromImport: "from", nodes.Block: "block", nodes.With: "with",
              nodes.Scope: "autoescape", nodes.ScopedEvalContextModifier: "autoescape",
              nodes.Pow: "**"}


def check_merge_fields(source: str, where: str) -> None:
    """Raise MergeError (naming `where` and the line) unless `source` is allowed merge syntax."""
    try:
        tree = TEXT_ENV.parse(source)
    except TemplateSyntaxError as exc:
        problem = (exc.message or "unexpected text").rstrip(".")
        raise MergeError(f"The {where} has a merge-field error on line {exc.lineno}: "
                         f"{problem}. Fields look like {{{{ name }}}}.") from None
    for node in tree.find_all(nodes.Node):
        lineno = getattr(node, "lineno", 1)
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


@dataclass(frozen=True)
class SplitText:
    """User text with every merge field replaced by a placeholder token."""

    text: str
    fields: dict[str, str]  # placeholder -> normalised Jinja source of the field


class Placeholders:
    """Mints placeholder tokens that Markdown, nh3, css-inline and inscriptis leave alone.

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

    def is_block(self, token: str) -> bool:
        return token[3 + len(self.nonce)] == "b"


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


def compile_template(env: MergeEnvironment, source: str, where: str):
    try:
        return env.from_string(source)
    except TemplateError as exc:
        raise MergeError(f"The {where} could not be prepared: {exc}") from None
