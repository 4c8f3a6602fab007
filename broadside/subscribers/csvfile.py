"""Reading an import file: the header, then one record at a time with its line number.

Pure parsing and validation, no database: `records()` streams a file from disk through the
csv module (never the whole file in memory) and `validate_record()` says why a row cannot be
imported, in words the owner can act on, or what it changed to import it (a name longer than
the column is shortened, with a warning).

A rejected-rows download (`broadside.subscribers.import_report`) puts its own two columns,
`rejected_line` and `rejected_reason`, before the row as uploaded; this reader ignores
those two columns, so the owner can fix the rows in place and upload that file as it is.
"""

from __future__ import annotations

import codecs
import csv
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from broadside.accounts import normalise_email
from broadside.errors import ValidationError
from broadside.subscribers.service import MAX_ATTRIBUTE_VALUE, MAX_EMAIL, MAX_NAME

HEADER_SNIFF_BYTES = 64 * 1024
# Spreadsheet-safe exports prefix these with an apostrophe; importing strips it again.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
NOT_UTF8 = "the line is not valid UTF-8 text (save the file as \"CSV UTF-8\")"
# No real row comes near this; a longer "line" is not CSV and must not be read into memory.
MAX_LINE_BYTES = 1024 * 1024
LINE_TOO_LONG = "the line is longer than 1 MB"
# The columns a rejected-rows download adds; an import ignores them (see the docstring).
REPORT_COLUMNS = ("rejected_line", "rejected_reason")


def unescape_cell(value: str) -> str:
    if len(value) > 1 and value[0] == "'" and value[1] in FORMULA_PREFIXES:
        return value[1:]
    return value


# A dot-atom local part of plain ASCII letters, digits, _ + and -: RFC 5322 says what is valid
# here without the validator's help (no quoting, no Unicode, no dot at either end or twice).
_PLAIN_LOCAL_PART = re.compile(r"[a-z0-9_+-]+(?:\.[a-z0-9_+-]+)*\Z")


class EmailNormaliser:
    """`normalise_email`, with each domain's verdict remembered for the rest of the file.

    Validating the domain is most of email_validator's cost (about 50 µs an address, half
    the 10 s budget of a 100,000-row import) and a list has few distinct domains. Only a plain
    local part on a domain the validator itself accepted takes the short way; everything else
    (and every error message) comes from `normalise_email`.
    """

    def __init__(self, max_domains: int = 50_000) -> None:
        self.domains: dict[str, str | None] = {}
        self.max_domains = max_domains

    def __call__(self, raw: str) -> str:
        raw = raw.strip()
        local, at, domain = raw.rpartition("@")
        if (at and raw.isascii() and len(raw) <= 200 and len(local) <= 64
                and _PLAIN_LOCAL_PART.match(local.lower())):
            key = domain.lower()
            if key in self.domains:
                known = self.domains[key]
            else:
                try:
                    known = normalise_email("x@" + domain).split("@", 1)[1]
                except ValidationError:
                    known = None
                if len(self.domains) < self.max_domains:
                    self.domains[key] = known
            if known is not None:
                return f"{local.lower()}@{known}"
        return normalise_email(raw)


@dataclass
class Header:
    delimiter: str
    columns: list[str]
    email_index: int
    name_index: int | None
    attribute_columns: list[tuple[int, str]]
    # Where a rejected-rows download's own columns are (ignored: see the module docstring).
    report_indices: tuple[int, ...] = ()

    @property
    def original_columns(self) -> list[str]:
        """The header as the owner wrote it, without a rejected-rows download's columns."""
        return self.original(self.columns)

    def original(self, fields: list[str]) -> list[str]:
        if not self.report_indices:
            return fields
        return [f for i, f in enumerate(fields) if i not in self.report_indices]


def parse_header(first_line: bytes) -> Header:
    """The header row, or a ValidationError saying why this is not a CSV we can import."""
    if first_line.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ValidationError(
            'The file is UTF-16 text; save it as "CSV UTF-8" and upload it again.'
        )
    if b"\x00" in first_line:
        raise ValidationError("This is not a CSV file (it contains binary data).")
    if first_line.startswith(codecs.BOM_UTF8):
        first_line = first_line[len(codecs.BOM_UTF8):]
    if any(byte < 32 and byte not in b"\t\r\n" for byte in first_line):
        raise ValidationError("This is not a CSV file (it contains binary data).")
    try:
        line = first_line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ValidationError(
            'The header row is not UTF-8 text; save the file as "CSV UTF-8" and upload it again.'
        ) from None
    delimiter = max((",", ";", "\t"), key=line.count) if line else ","
    try:
        columns = [c.strip() for c in next(csv.reader([line], delimiter=delimiter))]
    except (csv.Error, StopIteration):
        raise ValidationError("The first row is not a CSV header.") from None
    lowered = [c.lower() for c in columns]
    if "email" not in lowered:
        shown = ", ".join(repr(c[:40]) for c in columns[:5]) or "nothing"
        raise ValidationError(
            "The first row must be a header with an 'email' column (found "
            f"{shown}). Is this a CSV file?"
        )
    duplicates = sorted({c for c in lowered if c and lowered.count(c) > 1})
    if duplicates:
        raise ValidationError(f"The header names the column {duplicates[0]!r} more than once.")
    if any(len(c) > 100 for c in columns):
        raise ValidationError("A column name in the header is longer than 100 characters.")
    email_index = lowered.index("email")
    name_index = lowered.index("name") if "name" in lowered else None
    report = tuple(i for i, c in enumerate(lowered) if c in REPORT_COLUMNS)
    attributes = [(i, c) for i, c in enumerate(columns)
                  if c and i not in (email_index, name_index) and i not in report]
    return Header(delimiter, columns, email_index, name_index, attributes, report)


def check_file(path: Path) -> Header:
    """Everything we can say about the whole file before writing anything."""
    with open(path, "rb") as raw:
        sample = raw.read(HEADER_SNIFF_BYTES)
        if b"\x00" in sample and not sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            raise ValidationError("This is not a CSV file (it contains binary data).")
        if b"\r" in sample and b"\n" not in sample:
            raise ValidationError('The lines of this file end with CR only (an old Mac format); '
                                  'save it as "CSV UTF-8" and upload it again.')
        raw.seek(0)
        first_line = raw.readline(HEADER_SNIFF_BYTES)
        if not first_line.strip():
            raise ValidationError("The file is empty." if not first_line else
                                  "The first line of the file is blank; it must be the header.")
        if not first_line.endswith(b"\n") and len(first_line) >= HEADER_SNIFF_BYTES:
            raise ValidationError("This is not a CSV file (its first line is not a header).")
        header = parse_header(first_line)
        for line, _ in _bounded_lines(raw):
            if line.strip():
                return header
    raise ValidationError("The file has a header row but no subscribers under it.")


def _bounded_lines(raw: IO[bytes]) -> Iterator[tuple[bytes, bool]]:
    """(physical line, too long) pairs; a line over MAX_LINE_BYTES is skipped, not read in."""
    while line := raw.readline(MAX_LINE_BYTES):
        if len(line) < MAX_LINE_BYTES or line.endswith(b"\n"):
            yield line, False
            continue
        while (rest := raw.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
            pass
        yield b"\n", True


class _Lines:
    """Decoded lines of a binary file; remembers which physical lines were not UTF-8 text
    or too long, so the record they belong to can be rejected with that reason."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.number = 0
        self.bad: dict[int, str] = {}

    def __iter__(self) -> Iterator[str]:
        for chunk, too_long in _bounded_lines(self.raw):
            self.number += 1
            if too_long:
                self.bad[self.number] = LINE_TOO_LONG
            if self.number == 1 and chunk.startswith(codecs.BOM_UTF8):
                chunk = chunk[len(codecs.BOM_UTF8):]
            try:
                yield chunk.decode("utf-8")
            except UnicodeDecodeError:
                self.bad[self.number] = NOT_UTF8
                yield chunk.decode("utf-8", "replace")


def records(path: Path) -> Iterator[tuple[int, list[str] | None, str | None]]:
    """(line where the record starts, fields, reason when rejected) for each record.

    A record is rejected with its fields when they could be read (a line that is not UTF-8
    comes with its bad bytes replaced by U+FFFD) and with None when not (malformed CSV, a
    line over 1 MB).
    """
    with open(path, "rb") as raw:
        header = parse_header(raw.readline(HEADER_SNIFF_BYTES))
        raw.seek(0)
        lines = _Lines(raw)
        reader = csv.reader(iter(lines), delimiter=header.delimiter)
        end = 0
        next(reader, None)  # the header, checked above
        end = reader.line_num
        while True:
            start = end + 1
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                end = reader.line_num
                yield start, None, f"malformed CSV: {exc}"
                continue
            end = reader.line_num
            if lines.bad:
                reasons = [lines.bad.pop(n) for n in range(start, end + 1) if n in lines.bad]
                if reasons:
                    yield start, None if LINE_TOO_LONG in reasons else fields, reasons[0]
                    continue
            if not any(f.strip() for f in fields):
                continue
            yield start, fields, None


def count_records(path: Path) -> int:
    """How many records `records()` yields for this file (the progress bar's exact total):
    the same reader, so quoted newlines, blank rows and malformed lines count alike."""
    return sum(1 for _ in records(path))


# What must stay with the character before it: combining marks, the zero-width joiner,
# variation selectors and skin-tone modifiers (cutting there would change what is shown).
_JOINERS = {"\u200d", "\ufe0e", "\ufe0f", *map(chr, range(0x1F3FB, 0x1F400))}


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, never inside a character sequence that reads
    as one (a letter and its accents, an emoji with its modifiers), without trailing spaces."""
    if len(text) <= limit:
        return text
    end = limit
    while end > 0 and (text[end] in _JOINERS or text[end - 1] == "\u200d"
                       or unicodedata.category(text[end]) in ("Mn", "Mc", "Me")):
        end -= 1
    return text[:end].rstrip()


@dataclass
class Accepted:
    email: str
    name: str
    attributes: dict[str, str]
    warnings: list[str]


def validate_record(header: Header, fields: list[str],
                    normalise: Callable[[str], str] = normalise_email) -> Accepted:
    """The person in one record, with a warning for each value changed to import them; or
    ValidationError with the reason the record cannot be imported."""
    if len(fields) > len(header.columns):
        raise ValidationError(
            f"the row has {len(fields)} fields but the header has {len(header.columns)}"
        )

    if any("\x00" in field for field in fields):  # PostgreSQL refuses NUL in text
        raise ValidationError("a NUL character in the row")

    def cell(index: int | None) -> str:
        if index is None or index >= len(fields):
            return ""
        return unescape_cell(fields[index].strip())

    raw_email = cell(header.email_index)
    if not raw_email:
        raise ValidationError("missing email address")
    if len(raw_email) > MAX_EMAIL:
        raise ValidationError(f"email address longer than {MAX_EMAIL} characters")
    email = normalise(raw_email)
    warnings = []
    name = " ".join(cell(header.name_index).split())
    if len(name) > MAX_NAME:
        warnings.append(f"name shortened to {MAX_NAME} characters (it had {len(name):,})")
        name = shorten(name, MAX_NAME)
    attributes: dict[str, str] = {}
    for index, key in header.attribute_columns:
        value = cell(index)
        if len(value) > MAX_ATTRIBUTE_VALUE:
            raise ValidationError(
                f"the value in column {key!r} is longer than {MAX_ATTRIBUTE_VALUE} characters"
            )
        if value:
            attributes[key] = value
    return Accepted(email, name, attributes, warnings)
