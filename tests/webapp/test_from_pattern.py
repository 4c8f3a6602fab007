"""The From an identity takes, as the API's document states it: international addresses
(RFC 6531) pass, with each letter the pattern admits one that normalise_email takes too."""

from __future__ import annotations

import re

import pytest

from broadside.core.addresses import normalise_email
from broadside.delivery.identities import from_field
from broadside.delivery.identities.inputs import parse_input


def _letters() -> list[str]:
    ranges = re.findall(r"\\u([0-9A-F]{4})(?:-\\u([0-9A-F]{4}))?", from_field._INTL)
    return [chr(cp) for start, end in ranges
            for cp in range(int(start, 16), int(end or start, 16) + 1)]


def test_every_letter_the_pattern_admits_is_one_an_address_may_hold():
    letters = _letters()
    assert len(letters) > 20_000
    admitted = set(letters) | set("abcdefghijklmnopqrstuvwxyz0123456789.@")
    for letter in letters:
        # ...and what it becomes (lower-cased, NFC, IDNA's mapping) is admitted too, so the
        # From the API shows back matches the document's pattern as well.
        normal = normalise_email(f"a{letter}@a{letter}.de")
        assert set(normal) <= admitted and len(normal) == 8, letter


@pytest.mark.parametrize("value", ["News <news@exämple.de>", "jürgen@exämple.de",
                                   "Новости <почта@пример.рф>", "news@xn--exmple-cua.de"])
def test_an_international_from_is_taken(value):
    assert re.fullmatch(from_field.FROM_PATTERN, value)
    parsed = parse_input({"name": "intl", "from": value, "transport": "smtp://127.0.0.1:2525"})
    assert parsed.from_email == normalise_email(value.rpartition("<")[2].rstrip(">"))


@pytest.mark.parametrize("value", ["a@localhost", "a@b.test", "a b@example.com"])
def test_reserved_and_malformed_stay_refused(value):
    assert not re.fullmatch(from_field.FROM_PATTERN, value)
