"""Measuring and bounding what a merge field builds: the numbers, the work budget of one
render, and the bounded pieces (formatters, filters, size checks) that
`broadside.mail.merge_sandbox`'s environment is made of. Every check runs before a value is built
(its size is computed from the inputs) and again on the result.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, ItemsView, KeysView, Mapping, ValuesView
from contextvars import ContextVar
from typing import Any

from jinja2.sandbox import (
    SandboxedEscapeFormatter,
    SandboxedFormatter,
    SecurityError,
)

MAX_REPEAT = 10_000  # characters (or weighted items) one `*` repetition may build
MAX_VALUE = 100_000  # characters any one value built by a merge field may have
MAX_FORMAT_WIDTH = 1_000  # largest width or precision in a %-format or format spec
MAX_INT_BITS = 4_096  # largest product of integers (about 1,230 digits)
MAX_ROUND_DIGITS = 100  # largest precision (either sign) for the round filter
MAX_NESTING = 40  # deepest nesting of one merge field (brackets, operators, filters, ifs)
# Work budget of one render (subject, HTML or text) in units: each character a merge field
# builds or prints costs 1, each operation (filter, method, operator, `~`, format field) OP_COST
# more, and each list/dict item measured ITEM_COST. About a third of a second at most.
RENDER_BUDGET = 2_000_000
OP_COST = 100
ITEM_COST = 10


class MergeLimitError(SecurityError):
    """A merge field broke one of the bounds above (the message says which)."""


class Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


current_budget: ContextVar[Budget | None] = ContextVar("merge_budget", default=None)


def charge(amount: int) -> None:
    """Count `amount` characters of work against the render in progress (if any)."""
    budget = current_budget.get()
    if budget is not None:
        budget.left -= amount
        if budget.left < 0:
            raise MergeLimitError(
                f"the merge fields do too much work (over {RENDER_BUDGET:,} characters built "
                "or printed for one message)")


CONTAINERS = (list, tuple, set, frozenset, KeysView, ValuesView, ItemsView)


def size_of(value: Any, limit: int = MAX_VALUE) -> int:
    """About how many characters `value` takes as text: exact for a string, an upper bound for
    numbers, items plus contents for containers. Stops (returning limit + 1) as soon as it
    passes `limit`, so it costs at most `limit` steps even for a list repeating one big item."""
    if isinstance(value, str):
        return len(value)
    total = visits = 0
    stack = [value]
    while stack:
        item = stack.pop()
        visits += 1
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2
        elif isinstance(item, float):
            total += 24
        elif isinstance(item, Mapping):
            if len(item) > limit:
                return limit + 1
            total += 2
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, CONTAINERS):
            if len(item) > limit:
                return limit + 1
            total += 2
            stack.extend(item)
        else:
            total += 1  # undefined values, methods and the like print as nothing
        if total > limit:
            total = limit + 1
            break
    if visits > 1:
        charge(visits * ITEM_COST)
    return total


def bounded(size: int, what: str) -> int:
    """`size`, charged to the render, unless it is over MAX_VALUE."""
    if size > MAX_VALUE:
        raise MergeLimitError(f"{what} would be too long (over {MAX_VALUE:,} characters)")
    charge(size)
    return size


def checked(value: Any, what: str) -> Any:
    bounded(size_of(value), what)
    return value


def _check_width(digits: str, what: str) -> int:
    if len(digits.lstrip("0")) > 6 or int(digits) > MAX_FORMAT_WIDTH:
        raise MergeLimitError(f"{what} has a width or precision over {MAX_FORMAT_WIDTH:,}")
    return int(digits)


def printf_widths(fmt: str) -> int:
    """The sum of the widths and precisions of a %-format (as Python's parser reads them);
    refuses `*` widths and any width or precision over MAX_FORMAT_WIDTH."""
    total, end = 0, len(fmt)
    i = fmt.find("%")
    while i != -1:
        j = i + 1
        if j < end and fmt[j] == "(":
            depth, j = 1, j + 1
            while j < end and depth:
                depth += {"(": 1, ")": -1}.get(fmt[j], 0)
                j += 1
        while j < end and fmt[j] in "-+ #0":
            j += 1
        for part in ("width", "precision"):
            if j < end and fmt[j] == "*":
                raise MergeLimitError("a %-format may not take its width from '*'")
            start = j
            while j < end and fmt[j] in "0123456789":
                j += 1
            if j > start:
                total += _check_width(fmt[start:j], "a %-format")
            if part == "width" and j < end and fmt[j] == ".":
                j += 1
            else:
                break
        i = fmt.find("%", j + 1)
    return total


_DIGITS = re.compile(r"\d+")


class BoundedFormatter(SandboxedFormatter):
    """str.format for merge fields: no width or precision over MAX_FORMAT_WIDTH (any digits in
    a spec count, after nested fields are filled in) and at most MAX_VALUE characters of fields
    in one call."""

    def __init__(self, env: Any, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self._total = 0

    def _add(self, amount: int) -> None:
        charge(OP_COST + amount)
        self._total += amount
        if self._total > MAX_VALUE:
            raise MergeLimitError(
                f"format() would build a value too long (over {MAX_VALUE:,} characters)")

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        self._add(size_of(value))
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        widths = sum(_check_width(digits, "a format") for digits in
                     _DIGITS.findall(format_spec))
        self._add(size_of(value) + widths)
        text = super().format_field(value, format_spec)
        self._total += len(text)
        if self._total > MAX_VALUE:
            self._add(0)
        return text


class BoundedEscapeFormatter(BoundedFormatter, SandboxedEscapeFormatter):
    pass


def replace_size(text: str, old: Any, new: Any, count: Any = -1) -> int:
    # The filter turns any value into text first (the method would raise TypeError).
    old, new = str(old), str(new)  # both already held to MAX_VALUE by the caller
    found = len(text) + 1 if old == "" else str.count(str(text), str(old))
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + max(0, found * (len(new) - len(old)))


def join_size(separator: Any, items: list[Any]) -> int:
    size = size_of(items)
    if size > MAX_VALUE:
        return size
    return size + size_of(separator) * max(len(items) - 1, 0)


def bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` with its inputs and its result held to MAX_VALUE and charged to the render."""
    what = f"the {name} filter"

    @functools.wraps(func)  # keeps the jinja_pass_arg marker
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        size = sum(size_of(arg) for arg in args) + sum(size_of(v) for v in kwargs.values())
        # The values the filter works on (without the context Jinja passes some filters first).
        values = args[1:] if getattr(func, "jinja_pass_arg", None) is not None else args
        subject = values[0] if values else None
        if name == "replace" and len(values) >= 3 and size_of(subject) <= MAX_VALUE:
            size = max(size, replace_size(subject if isinstance(subject, str) else str(subject),
                                           *values[1:4]))
        elif (name == "join" and isinstance(subject, (str, *CONTAINERS, Mapping))
              and size_of(subject) <= MAX_VALUE):
            separator = values[1] if len(values) > 1 else kwargs.get("d", "")
            size = max(size, join_size(separator, list(subject)))
        elif name == "round":
            # Jinja's "floor"/"ceil" multiply the value by 10**precision: a string or a list
            # would be repeated that many times. (A missing value stays allowed: it prints nothing.)
            if isinstance(subject, (str, bytes, *CONTAINERS, Mapping)):
                raise MergeLimitError("round() works on numbers only")
            precision = values[1] if len(values) > 1 else kwargs.get("precision", 0)
            if not isinstance(precision, int) or abs(precision) > MAX_ROUND_DIGITS:
                raise MergeLimitError(f"round() takes a precision between -{MAX_ROUND_DIGITS}"
                                      f" and {MAX_ROUND_DIGITS}")
        charge(OP_COST)
        bounded(size, what)
        return checked(func(*args, **kwargs), what)

    return wrapper
