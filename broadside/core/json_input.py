"""JSON that arrives from outside (the API's request bodies, providers' webhooks), read one way
with bounds, so no body can make the parser or the code after it fail with a 500.

- `json_within(raw, what=..., max_depth=..., max_bytes=...)`: the parsed value, or a
  ValidationError whose message says what is wrong (not JSON, not UTF-8, larger than
  `max_bytes`, nested deeper than `max_depth`, NaN or Infinity, a number beyond a float's
  range). Python's parser accepts NaN, Infinity and `1e999` (which PostgreSQL then refuses),
  and raises RecursionError past about a thousand levels: both become a message here, and
  nesting is counted again without recursion, because the code after the parse (a walk over
  an event, a JSON column) recurses too.
- `unstorable_at(value)`: where a string (a key or a value) holds a NUL character or a lone
  surrogate (`"\\u0000"`, `"\\ud800"`: valid JSON escapes), as a path like
  `event-data.recipient`; None when every string can be stored. PostgreSQL refuses NUL in
  text and psycopg (and SQLite's driver, and Redis's client) refuses lone surrogates when it
  encodes: a value holding either failed the request with a 500 after it was parsed.
  `unstorable(text)` asks the same of one string (webapp/text_input.py applies it to every
  form field, query parameter and path segment); `refuse_unstorable(value)` raises the
  ValidationError that names the field (`field` set to its path).
"""

from __future__ import annotations

import json
import math
from typing import Any

from broadside.core.errors import ValidationError

MAX_DEPTH = 32  # arrays and objects; a segment's deepest rules use 12, providers' events 5


class _NotANumber(ValueError):
    """A number JSON lets Python read but we refuse (its words are ours, shown)."""


def _refuse_constant(name: str) -> Any:
    raise _NotANumber(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotANumber(f"the number {text[:20]} is too large")
    return value


def nesting(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (counted without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = (item.values() if isinstance(item, dict)
                    else item if isinstance(item, list) else None)
        if children is not None:
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in children)
    return deepest


def json_within(raw: bytes | str, *, what: str = "The request body", max_depth: int = MAX_DEPTH,
                max_bytes: int | None = None) -> Any:
    """`raw` parsed as JSON within the bounds, or a ValidationError naming `what`."""
    if max_bytes is not None and len(raw) > max_bytes:
        raise ValidationError(f"{what} is larger than {max_bytes:,} bytes.")
    try:
        data = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
        too_deep = nesting(data) > max_depth
    except RecursionError:
        too_deep = True
    except json.JSONDecodeError as exc:  # where it stops parsing; Python's words stay out
        raise ValidationError(f"{what} is not valid JSON (it stops making sense at line "
                              f"{exc.lineno}, column {exc.colno}).") from None
    except _NotANumber as exc:
        raise ValidationError(f"{what} is not valid JSON: {exc}.") from None
    except ValueError:  # bytes that are not UTF-8, an integer of over 4,300 digits
        raise ValidationError(f"{what} is not valid JSON: it is not UTF-8 text, or holds a "
                              "number too long to read.") from None
    if too_deep:
        raise ValidationError(f"{what} nests arrays and objects more than {max_depth} deep.")
    return data


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def unstorable(text: str) -> bool:
    """True when `text` holds a NUL character or a lone surrogate: no column can store it."""
    return "\x00" in text or _has_surrogate(text)


def unstorable_at(value: Any) -> str | None:
    """The path of the first string in `value` holding a NUL or a lone surrogate, else None.

    Iterative, like `nesting`; a path names keys by name and list items by [index]."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if unstorable(item):
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                name = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and unstorable(key):
                    return (f"{path}." if path else "") + ascii(key)[1:-1]
                stack.append((child, name))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
    return None


def refuse_unstorable(value: Any, what: str = "The request body") -> None:
    """ValidationError naming the field when a string in `value` cannot be stored."""
    path = unstorable_at(value)
    if path is not None:
        shown = f"'{path}'" if path.isprintable() else ascii(path)
        where = f"{what}'s field {shown}" if path else what
        raise ValidationError(f"{where} holds a NUL character or a lone surrogate (such as "
                              "\\u0000 or \\ud800), which no text can store: nothing was "
                              "written.", field=path or None)
