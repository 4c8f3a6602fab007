"""`{{ code }}`, the merge field of a minted code: filled per recipient by the worker with the
code its claim minted, a sample in previews and test sends, and an error where codes are off
(a message saying "your code: " and nothing after it is worse than no message).
"""

from __future__ import annotations

from collections.abc import Mapping

from broadside.core.errors import ValidationError
from broadside.mail.merge_check import field_uses
from broadside.mail.merge_fields import MergeError, check_merge_fields

FIELD = "code"


def sample(prefix: str) -> str:
    """What a preview or a test send shows for `{{ code }}`: never a minted code (X is in the
    alphabet, so the words after it say what it is)."""
    return f"{prefix}-XXXXXXXX (sample code)"


def uses_code(source: str) -> int | None:
    """The line of the first `{{ code }}` in `source` (valid merge syntax), else None."""
    if FIELD not in source:
        return None
    for use in field_uses(source):
        if use.kind == "unknown" and use.key == FIELD:
            return use.line
    return None


def without_codes(where: str, line: int) -> MergeError:
    place = f"{where}, line {line}" if where.endswith("body") else where
    return MergeError(f"In the {place}: {{{{ code }}}} is filled in only when “Mint a code per "
                      "recipient” is on. Turn it on (with a prefix), or remove the field.",
                      line=line)


def check_code_fields(texts: Mapping[str, str], codes_on: bool) -> None:
    """Refuse `{{ code }}` in any of `texts` ({where: source}) when codes are off (at the
    press of Send, at a step's save). Syntax mistakes are told elsewhere."""
    if codes_on:
        return
    for where, source in texts.items():
        try:
            check_merge_fields(source or "", where)
        except ValidationError:
            continue
        line = uses_code(source or "")
        if line is not None:
            raise without_codes(where, line)
