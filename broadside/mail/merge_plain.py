"""Plain merge templates without the sandbox's per-render machinery: the same text, faster.

Most revisions use merge fields only as plain substitutions: `{{ name }}`, `{{ name or
"friend" }}`, `{{ name | default("friend", true) }}`, `{{ attributes.city }}`, and
`{% if attributes.vip %}…{% endif %}`. For those, `plain_template` turns the parsed template
(once per revision) into literal chunks and a handful of distinct expressions; `render`
evaluates each expression once per recipient and joins. A sandboxed Jinja render of the same
template builds a context, runs a generator and calls the finalizer (escape and budget charge)
for every field it prints, nineteen times for the bench's newsletter.

Same bytes, or no answer: `render` returns exactly what `merge_sandbox.render_bounded` would
return, or None, and the caller then renders with the sandbox, which gives the answer (or the
MergeLimitError) itself. None whenever anything is outside what this module reproduces: a
value that is not a plain `str` (or None, or missing) where one is printed or filtered, a
value longer than PLAIN_VALUE_LIMIT, a lookup on something other than a plain dict, work that
could approach the render's budget, a result over its limit. What it reproduces, by node:

- literal text (TemplateData) as it is; a printed constant string escaped in HTML as Jinja
  folds it at compile time;
- a name: the context's value, or undefined when absent (the sandbox's `_QuietUndefined`:
  falsy, prints as nothing, every attribute of it undefined again);
- `a.b` on a plain dict whose type has no attribute `b` (Jinja's getattr finds none, so it
  looks the key up): the value or undefined; on undefined: undefined;
- `a or b`, `a and b`, `not a`: Python's, undefined being falsy;
- `default`/`d` with constant arguments: Jinja's do_default;
- `{% if %}`/`{% elif %}`/`{% else %}`: Python truth of the test;
- printing: in HTML markupsafe.escape of the string (what `_printed_html` yields), in text the
  string; None and undefined print as nothing.
Anything else in a template (another filter, a call, arithmetic, a comparison, `~`, a
subscript) makes the whole template go to the sandbox, every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jinja2 import nodes
from markupsafe import escape

from broadside.mail.merge_limits import MAX_VALUE, OP_COST, RENDER_BUDGET

# The longest string a plain render takes from a recipient (each value, before escaping):
# well inside MAX_VALUE, so no size bound of the sandbox can break on it (a `default` adds its
# constant's length; constants are held under PLAIN_CONST_LIMIT).
PLAIN_VALUE_LIMIT = MAX_VALUE // 2
PLAIN_CONST_LIMIT = 1_000


class _Bail(Exception):
    """This recipient's values are outside the plain path: render with the sandbox."""


class _Undefined:
    __slots__ = ()

    def __bool__(self) -> bool:
        return False


UNDEFINED = _Undefined()
_FILTERS = frozenset({"default", "d"})

Evaluate = Callable[[dict[str, Any]], Any]


class _NotPlain(Exception):
    """The template uses something this module does not reproduce."""


class PlainTemplate:
    """A template of literal chunks, printed expressions and `if` blocks.

    Which branches a render takes depends only on the truth of the `if` tests, so the text is
    laid out once per combination of test results (a list of literal chunks with the slots
    the printed values go into, kept per combination seen); a render evaluates the
    expressions, picks the layout and fills its slots."""

    def __init__(self, program: list[Any], expressions: list[Evaluate], uses: int,
                 autoescape: bool) -> None:
        self._program = program
        self._expressions = expressions
        self._uses = uses  # fields printed or tested, and filters run, over every branch
        self._autoescape = autoescape
        self._tests = sorted(_tests(program))
        self._layouts: dict[tuple[bool, ...], tuple[list[str], list[tuple[int, int]],
                                                    list[int]]] = {}

    def render(self, context: dict[str, Any], limit: int) -> str | None:
        """The text the sandbox would render for `context`, or None (render with the
        sandbox) when this recipient's values are outside what this class reproduces."""
        try:
            values = [evaluate(context) for evaluate in self._expressions]
        except _Bail:
            return None
        truths = tuple([bool(values[test]) for test in self._tests])
        layout = self._layouts.get(truths)
        if layout is None:
            layout = self._layout(truths)
        chunks, slots, fields = layout
        printed: dict[int, str] = {}
        longest = PLAIN_CONST_LIMIT
        for index in fields:
            value = values[index]
            if type(value) is str:
                printed[index] = escape(value) if self._autoescape else value
                longest = max(longest, len(value))
            elif value is None or value is UNDEFINED:
                printed[index] = ""
            else:
                return None  # the sandbox prints numbers, lists... its own way
        for value in values:  # the values only tested or filtered count too
            if type(value) is str and len(value) > longest:
                longest = len(value)
        # What the sandbox charges to the render's budget is at most this: each print charges
        # the value and its escaped form (at most 5 times longer), each filter its operation,
        # its inputs and its result. Every value a filter sees is either one of `values` or
        # empty, so `longest` bounds them all.
        if self._uses * (OP_COST + 10 + 8 * longest) > RENDER_BUDGET:
            return None
        out = chunks.copy()
        for position, index in slots:
            out[position] = printed[index]
        text = "".join(out)
        return text if len(text) <= limit else None

    def _layout(self, truths: tuple[bool, ...]) -> tuple[list[str], list[tuple[int, int]],
                                                         list[int]]:
        """The chunks and slots of the text when the tests come out as `truths`."""
        truth = dict(zip(self._tests, truths, strict=True))
        # The literal chunks are the program's own strings, referred to, never joined here:
        # a layout is a list of references, however long the text and however many layouts.
        chunks: list[str] = []
        slots: list[tuple[int, int]] = []

        def walk(program: list[Any]) -> None:
            for step in program:
                if type(step) is str:
                    chunks.append(step)
                elif type(step) is int:
                    slots.append((len(chunks), step))
                    chunks.append("")
                else:  # (branches, else): the first branch whose test is true
                    branches, otherwise = step
                    walk(next((body for test, body in branches if truth[test]), otherwise))

        walk(self._program)
        fields = sorted({index for _, index in slots})
        if len(self._layouts) >= 64:  # many `if`s: keep the memory bounded
            self._layouts.clear()
        self._layouts[truths] = (chunks, slots, fields)
        return chunks, slots, fields


def _tests(program: list[Any]) -> set[int]:
    found: set[int] = set()
    for step in program:
        if type(step) is tuple:
            branches, otherwise = step
            for test, body in branches:
                found.add(test)
                found |= _tests(body)
            found |= _tests(otherwise)
    return found


def plain_template(tree: nodes.Template, *, autoescape: bool) -> PlainTemplate | None:
    """`tree` (a parsed merge template) as a PlainTemplate, or None if it uses anything this
    module does not reproduce."""
    expressions: list[Evaluate] = []
    filters: list[int] = []
    index_of: dict[str, int] = {}
    uses = 0

    def expression(node: nodes.Node) -> int:
        nonlocal uses
        key = repr(node)  # the whole subtree: equal expressions share one evaluation
        if key not in index_of:
            evaluate, operations = _compile(node)
            index_of[key] = len(expressions)
            expressions.append(evaluate)
            filters.append(operations)
        index = index_of[key]
        uses += 1 + filters[index]
        return index

    def block(body: list[nodes.Node]) -> list[Any]:
        program: list[Any] = []
        for node in body:
            if isinstance(node, nodes.Output):
                for child in node.nodes:
                    if isinstance(child, nodes.TemplateData):
                        program.append(child.data)
                    elif isinstance(child, nodes.Const):  # folded by Jinja when it compiles
                        if type(child.value) is not str or len(child.value) > PLAIN_CONST_LIMIT:
                            raise _NotPlain
                        program.append(str(escape(child.value)) if autoescape else child.value)
                    else:
                        program.append(expression(child))
            elif isinstance(node, nodes.If):
                branches = [(expression(node.test), block(node.body))]
                for elif_ in node.elif_:
                    branches.append((expression(elif_.test), block(elif_.body)))
                program.append((branches, block(node.else_)))
            else:
                raise _NotPlain
        return program

    try:
        program = block(tree.body)
    except _NotPlain:
        return None
    return PlainTemplate(program, expressions, uses, autoescape)


def _value(value: Any) -> Any:
    if type(value) is str and len(value) > PLAIN_VALUE_LIMIT:
        raise _Bail
    return value


def _compile(node: nodes.Node) -> tuple[Evaluate, int]:
    """An evaluator for one expression, and how many budgeted operations it runs."""
    if isinstance(node, nodes.Name) and node.ctx == "load":
        name = node.name

        def lookup(context: dict[str, Any]) -> Any:
            return _value(context[name]) if name in context else UNDEFINED
        return lookup, 0
    if isinstance(node, nodes.Const):
        if not isinstance(node.value, str | bool | int | type(None)) or (
                isinstance(node.value, str) and len(node.value) > PLAIN_CONST_LIMIT):
            raise _NotPlain
        constant = node.value
        return (lambda context: constant), 0
    if isinstance(node, nodes.Getattr) and node.ctx == "load":
        attribute = node.attr
        if hasattr(dict, attribute):  # Jinja's getattr would find the method, not the key
            raise _NotPlain
        inner, operations = _compile(node.node)

        def getattr_(context: dict[str, Any]) -> Any:
            obj = inner(context)
            if obj is UNDEFINED:
                return UNDEFINED
            if type(obj) is not dict:
                raise _Bail
            return _value(obj[attribute]) if attribute in obj else UNDEFINED
        return getattr_, operations
    if isinstance(node, nodes.Or | nodes.And):
        left, left_ops = _compile(node.left)
        right, right_ops = _compile(node.right)
        if isinstance(node, nodes.Or):
            return (lambda context: left(context) or right(context)), left_ops + right_ops
        return (lambda context: left(context) and right(context)), left_ops + right_ops
    if isinstance(node, nodes.Not):
        operand, operations = _compile(node.node)
        return (lambda context: not operand(context)), operations
    if isinstance(node, nodes.Filter) and node.name in _FILTERS and node.node is not None:
        arguments = [arg.value for arg in node.args if isinstance(arg, nodes.Const)]
        if node.kwargs or node.dyn_args or node.dyn_kwargs or len(node.args) > 2 or (
                len(arguments) != len(node.args)):
            raise _NotPlain
        fallback = arguments[0] if arguments else ""
        if type(fallback) is not str or len(fallback) > PLAIN_CONST_LIMIT:
            raise _NotPlain
        boolean = arguments[1] if len(arguments) > 1 else False
        if not isinstance(boolean, bool | int) or not -2**31 < boolean < 2**31:
            raise _NotPlain
        inner, operations = _compile(node.node)

        def default(context: dict[str, Any]) -> Any:
            value = inner(context)
            if not (type(value) is str or value is None or value is UNDEFINED):
                raise _Bail  # the filter's size checks measure other values their own way
            if value is UNDEFINED or (boolean and not value):
                return fallback
            return value
        return default, operations + 1
    raise _NotPlain
