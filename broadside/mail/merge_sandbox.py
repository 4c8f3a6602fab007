"""The sandbox merge fields run in: an immutable Jinja sandbox with every way of building a
large value bounded.

Merge fields cannot exhaust memory or CPU. Every way an expression can build a value is
bounded *before* the value is built: repetition (`*`), `+` and `~`, %-formatting and
str.format/format_map (widths and precisions at most MAX_FORMAT_WIDTH, no `*` widths),
`replace`, `join`, every filter, integer products (MAX_INT_BITS) and `round` precisions; the
padding and encoding methods (center, ljust, rjust, zfill, expandtabs, translate, encode...)
are not available, and only known, size-stable methods of str/list/dict/int/float can be
called. No single value may exceed MAX_VALUE characters, each render of a template has a work
budget (RENDER_BUDGET characters built or printed, see `render_bounded`), and an expression may
nest at most MAX_NESTING levels. The environment is immutable (a template cannot call
list.append, dict.update...), has no globals (no `range`) and allows no loops. A bound that
breaks raises MergeLimitError (a jinja SecurityError), which the renderer turns into a
MergeError naming the problem.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping
from string import Formatter
from typing import Any

from jinja2 import Template, nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.runtime import ChainableUndefined
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
)
from markupsafe import Markup, escape

from broadside.mail.merge_limits import (
    CONTAINERS,
    MAX_INT_BITS,
    MAX_REPEAT,
    MAX_VALUE,
    OP_COST,
    RENDER_BUDGET,
    BoundedEscapeFormatter,
    BoundedFormatter,
    Budget,
    MergeLimitError,
    bounded,
    bounded_filter,
    charge,
    checked,
    current_budget,
    join_size,
    printf_widths,
    replace_size,
    size_of,
)

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
# Methods that can blow a short value up to any size (or turn it into bytes): never callable.
REFUSED_METHODS = frozenset({
    "center", "ljust", "rjust", "zfill", "expandtabs", "translate", "maketrans", "encode",
    "to_bytes", "from_bytes", "fromkeys", "fromhex",
})
# The methods a merge field may call, by the type of the value. Each returns a value at most a
# small multiple of its inputs (checked again afterwards), except `replace` and `join`, which
# are bounded before they run; `format`/`format_map` go through the bounded formatter.
_STR_METHODS = frozenset({
    "capitalize", "casefold", "count", "endswith", "find", "index", "isalnum", "isalpha",
    "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric", "isprintable",
    "isspace", "istitle", "isupper", "join", "lower", "lstrip", "partition", "removeprefix",
    "removesuffix", "replace", "rfind", "rindex", "rpartition", "rsplit", "rstrip", "split",
    "splitlines", "startswith", "strip", "swapcase", "title", "upper",
    "striptags", "unescape",  # Markup's
})
_METHODS: tuple[tuple[type | tuple[type, ...], frozenset[str]], ...] = (
    (str, _STR_METHODS),
    ((int, float), frozenset({"as_integer_ratio", "bit_count", "bit_length", "conjugate",
                              "hex", "is_integer"})),
    ((list, tuple), frozenset({"copy", "count", "index"})),
    (dict, frozenset({"copy", "get", "items", "keys", "values"})),
)


class _MergeCodeGenerator(CodeGenerator):
    """Compiles `~` to a call the environment can bound (Jinja joins it inline)."""

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile:
            func_name = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            func_name = "markup_join"
        else:
            func_name = "str_join"
        self.write(f"environment.bounded_concat({func_name}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def _output_child_pre(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        # In the HTML template the finalizer (_printed_html) returns escaped Markup already, and
        # escaping Markup again returns the same text: the call Jinja wraps around each printed
        # field is left out (one call per field per recipient, nothing else changes).
        if (frame.eval_ctx.autoescape and not frame.eval_ctx.volatile
                and self.environment.finalize is _printed_html and finalize.src is not None):
            self.write("(" + finalize.src)
            return
        super()._output_child_pre(node, frame, finalize)


class _QuietUndefined(ChainableUndefined):
    """Unknown names, attributes and calls render as nothing; they never raise."""

    __slots__ = ()

    def _self(self, *args: Any, **kwargs: Any) -> _QuietUndefined:
        return self

    # Jinja declares these as `Undefined`'s always-raising method (typed as returning `Never`);
    # overriding them with methods that return is the point of this class.
    __call__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _self  # type: ignore[assignment]
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _self  # type: ignore[assignment]
    __neg__ = __pos__ = _self  # type: ignore[assignment]

    def _false(self, other: Any) -> bool:
        return False

    __lt__ = __le__ = __gt__ = __ge__ = _false  # type: ignore[assignment]

    def __int__(self) -> int:  # type: ignore[override]
        return 0

    def __float__(self) -> float:  # type: ignore[override]
        return 0.0


def _printable(value: Any) -> Any:
    # None and callables print as nothing: a method's repr would show a memory address.
    return "" if value is None or callable(value) else value


def _printed_text(value: Any) -> Any:
    """What a {{ … }} prints in the plain-text templates, charged to the render."""
    if type(value) is str:  # the usual field (a name): what `checked` does, in one step
        bounded(len(value), "a merge field's value")
        return value
    return checked(_printable(value), "a merge field's value")


def _printed_html(value: Any) -> Markup:
    """What a {{ … }} prints in the HTML template: escaped here rather than by Jinja (escaping
    Markup again changes nothing), so the charge is the escaped length."""
    if type(value) is str:  # the usual field (a name): the same checks and charges, fewer calls
        if len(value) > MAX_VALUE:
            bounded(len(value), "a merge field's value")  # raises
        html = escape(value)
        charge(len(value) + len(html))  # over budget after either charge iff after both
        return html
    value = _printable(value)
    bounded(size_of(value), "a merge field's value")
    html = escape(value)
    charge(len(html))
    return html


_SEQUENCES = (str, list, tuple)


class MergeEnvironment(ImmutableSandboxedEnvironment):
    """Sandboxed and immutable (a template cannot mutate its context): no globals, only
    ALLOWED_FILTERS, and every operation that could build a big value bounded."""

    intercepted_binops = frozenset({"*", "+", "%", "**"})
    code_generator_class = _MergeCodeGenerator

    def __init__(self, *, autoescape: bool) -> None:
        super().__init__(
            autoescape=autoescape,
            undefined=_QuietUndefined,
            finalize=_printed_html if autoescape else _printed_text,
            keep_trailing_newline=True,
            cache_size=0,
        )
        self.globals.clear()  # no range, lipsum, cycler, joiner, namespace, dict
        self.filters = {name: bounded_filter(name, self.filters[name])
                        for name in ALLOWED_FILTERS}

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            raise MergeLimitError("'**' is not available in merge fields")
        charge(OP_COST)
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, _SEQUENCES) and isinstance(count, int):
                    size = size_of(seq, MAX_REPEAT) * max(count, 0)
                    if size > MAX_REPEAT:
                        raise MergeLimitError(
                            f"that repetition is too long (over {MAX_REPEAT:,} characters)")
                    charge(size)
            if (isinstance(left, int) and isinstance(right, int)
                    and left.bit_length() + right.bit_length() > MAX_INT_BITS):
                raise MergeLimitError(f"that number is too large (over {MAX_INT_BITS:,} bits)")
        elif operator == "+":
            if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
                bounded(size_of(left) + size_of(right), "that sum")
        elif operator == "%" and isinstance(left, str):
            bounded(len(left) + printf_widths(left) + size_of(right), "that %-format")
        result = super().call_binop(context, operator, left, right)
        if operator != "**" and isinstance(result, _SEQUENCES):
            checked(result, "that value")
        return result

    def bounded_concat(self, join: Callable[[Any], str], parts: tuple[Any, ...]) -> str:
        """`a ~ b ~ …`, refused before joining when the result would be too long."""
        charge(OP_COST)
        bounded(sum(size_of(part) for part in parts), "that ~ concatenation")
        return checked(join(parts), "that ~ concatenation")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(__obj, "__name__", "")
        owner = getattr(__obj, "__self__", None)
        if name in REFUSED_METHODS:
            raise MergeLimitError(f"{name}() is not available in merge fields")
        if isinstance(__obj, types.BuiltinMethodType | types.MethodType):
            if isinstance(owner, type):
                raise MergeLimitError(f"{name}() is not available in merge fields")
            for kind, methods in _METHODS:
                if isinstance(owner, kind):
                    if name not in methods:
                        raise MergeLimitError(f"{name}() is not available in merge fields")
                    return __self._bounded_method(__context, __obj, owner, name, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def _bounded_method(self, context: Any, method: Any, owner: Any, name: str,
                        args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        what = f"{name}()"
        size = size_of(owner) + sum(size_of(arg) for arg in (*args, *kwargs.values()))
        if name == "replace" and isinstance(owner, str) and 2 <= len(args) <= 3 and not kwargs:
            size = max(size, replace_size(owner, *args))
        elif name == "join" and isinstance(owner, str) and len(args) == 1 and not kwargs:
            items = args[0]
            if isinstance(items, (str, *CONTAINERS, Mapping)) and size_of(items) <= MAX_VALUE:
                args = (list(items),)
                size = max(size, join_size(owner, args[0]))
        charge(OP_COST)
        bounded(size, what)
        return checked(super().call(context, method, *args, **kwargs), what)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """str.format / format_map through the bounded formatter (Jinja's own, bounded)."""
        if not isinstance(value, types.MethodType | types.BuiltinMethodType) or (
                value.__name__ not in ("format", "format_map")):
            return None
        f_self: Any = value.__self__
        if not isinstance(f_self, str):
            return None
        str_type: type[str] = type(f_self)
        is_format_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_format_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            bounded(len(f_self), "format()")
            formatter: Formatter
            if isinstance(f_self, Markup):
                formatter = BoundedEscapeFormatter(self, escape=f_self.escape)
            else:
                formatter = BoundedFormatter(self)
            return checked(str_type(formatter.vformat(f_self, args, kwargs)), "format()")

        return functools.update_wrapper(wrapper, value)


HTML_ENV = MergeEnvironment(autoescape=True)
TEXT_ENV = MergeEnvironment(autoescape=False)


def render_bounded(template: Template, context: dict[str, Any], *, limit: int,
                   what: str) -> str:
    """`template` filled in with `context`, with a fresh work budget (RENDER_BUDGET) for its
    merge fields, refused (MergeLimitError) if the result is longer than `limit` characters."""
    token = current_budget.set(Budget(RENDER_BUDGET))
    try:
        text = template.render(context)
    except RecursionError:
        raise MergeLimitError("the merge fields are nested too deeply") from None
    finally:
        current_budget.reset(token)
    if len(text) > limit:
        raise MergeLimitError(f"the {what} would be {len(text):,} characters long; the limit "
                              f"is {limit:,} characters")
    return text
