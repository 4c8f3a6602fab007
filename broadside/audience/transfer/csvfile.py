"""Reading an import file: the header, then one record at a time with its line number.

Pure parsing, no database: `records()` streams a file from disk through the csv module
(never the whole file in memory); what one record becomes (the person, or the reason they
cannot be imported) is `broadside.audience.transfer.people`.

A rejected-rows download (`broadside.audience.transfer.report`) puts its own two columns,
`rejected_line` and `rejected_reason`, before the row as uploaded; this reader ignores
those two columns, so the owner can fix the rows in place and upload that file as it is.

An export (`broadside.audience.transfer.export`) adds columns that say where each person
stands (`EXPORT_COLUMNS`); they are never attributes. `status` and `suppression` are read
(`broadside.audience.transfer.people`: a row that says the person left or is suppressed is not
put on the list); the dates, `unsubscribe_source` and `lists` are ignored (a list's dates are
its own). An attribute named like one of them is exported as `attributes.<name>`, read back
here as that attribute.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from broadside.core.errors import ValidationError
from broadside.core.i18n import _

HEADER_SNIFF_BYTES = 64 * 1024
# Spreadsheet-safe exports prefix these with an apostrophe; importing strips it again.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
NOT_UTF8 = "the line is not valid UTF-8 text (save the file as \"CSV UTF-8\")"
# No real row comes near this; a longer "line" is not CSV and must not be read into memory.
MAX_LINE_BYTES = 1024 * 1024
LINE_TOO_LONG = "the line is longer than 1 MB"
# Read at once, decoded at once when it is UTF-8 (shorter than MAX_LINE_BYTES: see _Lines).
BLOCK_BYTES = 256 * 1024
# The columns a rejected-rows download adds; an import ignores them (see the docstring).
REPORT_COLUMNS = ("rejected_line", "rejected_reason")
# The columns an export adds after email and name: a list's, and any other view's.
LIST_COLUMNS = ("status", "joined_at", "confirmed_at", "unsubscribed_at", "unsubscribe_source",
                "suppression", "suppressed_at", "locale", "timezone")
VIEW_COLUMNS = ("lists", "joined_at", "suppression", "suppressed_at", "locale", "timezone")
# The reader's language (a tag): the first of these the header names (the export's `locale`).
LOCALE_COLUMNS = ("locale", "language", "lang")
# The reader's time zone (an IANA name): likewise (the export's `timezone`).
TIMEZONE_COLUMNS = ("timezone", "time_zone", "tz")
EXPORT_COLUMNS = (*LIST_COLUMNS, "lists", *LOCALE_COLUMNS[1:], *TIMEZONE_COLUMNS[1:])
# Column names an attribute can have only as `attributes.<name>` (no attribute is called
# email or name: `broadside.audience.subscribers.service.RESERVED_ATTRIBUTES`).
_PREFIXED = {*REPORT_COLUMNS, *EXPORT_COLUMNS}
_NOT_ATTRIBUTES = {"email", "name", *_PREFIXED}
ATTRIBUTE_PREFIX = "attributes."


def attribute_column(key: str) -> str:
    """The column an export writes attribute `key` in (`attributes.<key>` for a name an
    import would read as one of its own columns)."""
    return ATTRIBUTE_PREFIX + key if key.lower() in _PREFIXED else key


def _attribute_key(column: str) -> str:
    """The attribute a column holds (`attribute_column`'s reverse)."""
    if column[:len(ATTRIBUTE_PREFIX)].lower() == ATTRIBUTE_PREFIX:
        key = column[len(ATTRIBUTE_PREFIX):]
        if key.lower() in _PREFIXED:
            return key
    return column


@dataclass
class Header:
    delimiter: str
    columns: list[str]
    email_index: int
    name_index: int | None
    attribute_columns: list[tuple[int, str]]
    # Where a rejected-rows download's own columns are (ignored: see the module docstring).
    report_indices: tuple[int, ...] = ()
    # An export's `status` and `suppression` columns, where the file has them.
    status_index: int | None = None
    suppression_index: int | None = None
    # The reader's language (`LOCALE_COLUMNS`), where the file has it.
    locale_index: int | None = None
    # The reader's time zone (`TIMEZONE_COLUMNS`), where the file has it.
    timezone_index: int | None = None

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
            _('The file is UTF-16 text; save it as "CSV UTF-8" and upload it again.')
        )
    if b"\x00" in first_line:
        raise ValidationError(_("This is not a CSV file (it contains binary data)."))
    if first_line.startswith(codecs.BOM_UTF8):
        first_line = first_line[len(codecs.BOM_UTF8):]
    if any(byte < 32 and byte not in b"\t\r\n" for byte in first_line):
        raise ValidationError(_("This is not a CSV file (it contains binary data)."))
    try:
        line = first_line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ValidationError(
            _('The header row is not UTF-8 text; save the file as "CSV UTF-8" and upload it again.')
        ) from None
    delimiter = max((",", ";", "\t"), key=line.count) if line else ","
    try:
        columns = [c.strip() for c in next(csv.reader([line], delimiter=delimiter))]
    except (csv.Error, StopIteration):
        raise ValidationError(_("The first row is not a CSV header.")) from None
    lowered = [c.lower() for c in columns]
    if "email" not in lowered:
        shown = ", ".join(repr(c[:40]) for c in columns[:5]) or _("nothing")
        raise ValidationError(_(
            "The first row must be a header with an 'email' column (found %(found)s). Is "
            "this a CSV file?", found=shown))
    duplicates = sorted({c for c in lowered if c and lowered.count(c) > 1})
    if duplicates:
        raise ValidationError(_("The header names the column %(column)r more than once.",
                                column=duplicates[0]))
    if any(len(c) > 100 for c in columns):
        raise ValidationError(_("A column name in the header is longer than 100 characters."))
    email_index = lowered.index("email")
    name_index = lowered.index("name") if "name" in lowered else None
    report = tuple(i for i, c in enumerate(lowered) if c in REPORT_COLUMNS)
    attributes = [(i, _attribute_key(c)) for i, c in enumerate(columns)
                  if c and lowered[i] not in _NOT_ATTRIBUTES]
    return Header(delimiter, columns, email_index, name_index, attributes, report,
                  lowered.index("status") if "status" in lowered else None,
                  lowered.index("suppression") if "suppression" in lowered else None,
                  next((lowered.index(c) for c in LOCALE_COLUMNS if c in lowered), None),
                  next((lowered.index(c) for c in TIMEZONE_COLUMNS if c in lowered), None))


def check_file(path: Path) -> Header:
    """Everything we can say about the whole file before writing anything."""
    with open(path, "rb") as raw:
        sample = raw.read(HEADER_SNIFF_BYTES)
        if b"\x00" in sample and not sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            raise ValidationError(_("This is not a CSV file (it contains binary data)."))
        if b"\r" in sample and b"\n" not in sample:
            raise ValidationError(_('The lines of this file end with CR only (an old Mac format); '
                                  'save it as "CSV UTF-8" and upload it again.'))
        raw.seek(0)
        first_line = raw.readline(HEADER_SNIFF_BYTES)
        if not first_line.strip():
            raise ValidationError(_("The file is empty.") if not first_line else
                                  _("The first line of the file is blank; it must be the header."))
        if not first_line.endswith(b"\n") and len(first_line) >= HEADER_SNIFF_BYTES:
            raise ValidationError(_("This is not a CSV file (its first line is not a header)."))
        header = parse_header(first_line)
        for line, _end in _bounded_lines(raw):
            if line.strip():
                return header
    raise ValidationError(_("The file has a header row but no subscribers under it."))


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
    or too long, so the record they belong to can be rejected with that reason.

    The file is read in blocks of whole lines. A block that is valid UTF-8 (nearly all of
    them) is decoded at once and its lines split at "\\n" in C, exactly as line-by-line
    reading would split them (UTF-8 never has a "\\n" byte inside a character, and a block
    is shorter than MAX_LINE_BYTES, so none of its lines is too long); a block that is not
    is read line by line as before, each line decoded on its own. A line longer than a block
    is read by `_bounded_lines` from where it starts.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.number = 0
        self.bad: dict[int, str] = {}

    def __iter__(self) -> Iterator[str]:
        return itertools.chain.from_iterable(self._pieces())

    def blocks(self) -> Iterator[str | None]:
        """Each block of whole lines decoded (its lines counted), or None where the next
        lines are not a clean block (not UTF-8, or a line longer than a block)."""
        raw = self.raw
        while True:
            start = raw.tell()
            data = raw.read(BLOCK_BYTES)
            if not data:
                return
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(data) == BLOCK_BYTES:  # a line at least a block long
                raw.seek(start)
                yield None
                continue
            if 0 < cut < len(data):
                raw.seek(start + cut)  # the next block starts with the line cut here
                data = data[:cut]
            if self.number == 0 and data.startswith(codecs.BOM_UTF8):
                data = data[len(codecs.BOM_UTF8):]
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raw.seek(start)
                yield None
                continue
            self.number += text.count("\n") + (not text.endswith("\n"))
            yield text

    def _pieces(self) -> Iterator[Iterable[str]]:
        raw = self.raw
        for text in self.blocks():
            if text is not None:
                yield io.StringIO(text, newline="\n")
                continue
            # Not a clean block: its lines one by one, as far as the next block's start.
            start = raw.tell()
            data = raw.read(BLOCK_BYTES)
            cut = data.rfind(b"\n") + 1
            raw.seek(start)
            if cut == 0 and len(data) == BLOCK_BYTES:
                yield self._decoded(itertools.islice(_bounded_lines(raw), 1))
            else:
                yield self._decoded(io.BytesIO(data[:cut] if cut else data))
                raw.seek(start + (cut or len(data)))

    def _decoded(self, lines: Iterable[bytes] | Iterator[tuple[bytes, bool]]
                 ) -> Iterator[str]:
        for item in lines:
            chunk, too_long = item if isinstance(item, tuple) else (item, False)
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


def records(path: Path, on_blank: Callable[[int], object] | None = None
            ) -> Iterator[tuple[int, list[str] | None, str | None]]:
    """(line where the record starts, fields, reason when rejected) for each record.

    A record is rejected with its fields when they could be read (a line that is not UTF-8
    comes with its bad bytes replaced by U+FFFD) and with None when not (malformed CSV, a
    line over 1 MB). A blank record (every field empty or spaces) is not yielded: its line
    goes to `on_blank`, so the import can say how many it skipped.
    """
    with open(path, "rb") as raw:
        header = parse_header(raw.readline(HEADER_SNIFF_BYTES))
        raw.seek(0)
        lines = _Lines(raw)
        reader = csv.reader(iter(lines), delimiter=header.delimiter)
        next(reader, None)  # the header, checked above
        end = reader.line_num
        bad = lines.bad
        while True:
            try:
                for fields in reader:
                    start = end + 1
                    end = reader.line_num
                    if bad:
                        reasons = [bad.pop(n) for n in range(start, end + 1) if n in bad]
                        if reasons:
                            yield start, None if LINE_TOO_LONG in reasons else fields, reasons[0]
                            continue
                    # Blank (every field empty or spaces): "".join(...).strip() is empty
                    # exactly when each field's strip() is.
                    if fields and (fields[0].strip() or "".join(fields).strip()):
                        yield start, fields, None
                    elif on_blank is not None:
                        on_blank(start)
                return
            except csv.Error as exc:
                start = end + 1
                end = reader.line_num
                yield start, None, malformed_words(exc)


def malformed_words(exc: csv.Error) -> str:
    """Why a record could not be read as CSV, in the owner's words (Python's own, such as
    "new-line character seen in unquoted field - do you need to open the file with
    newline=''?", are not written for them)."""
    said = str(exc)
    if "NUL" in said:
        return "malformed CSV: the line contains a NUL character (is the file really text?)"
    if "field larger than field limit" in said:
        return "malformed CSV: a cell is too long (over the largest cell accepted)"
    if "new-line" in said:
        return ("malformed CSV: a line break inside a cell that is not in double quotes; save "
                "the file again as CSV from your spreadsheet")
    return ("malformed CSV: a quote is not closed, or text follows a closing quote; a cell that "
            "holds commas, quotes or line breaks goes in double quotes, with each quote inside "
            "it doubled")


def count_records(path: Path) -> int:
    """How many records `records()` yields for this file (the progress bar's exact total).

    A file of clean blocks (`_Lines.blocks`) without a quote character, the usual export,
    is counted from its blocks: there each line is one record, except a blank one (spaces
    and delimiters only, which `records()` skips). Only a line that starts with a space or
    the delimiter, or is empty, can be blank: a block with none (one regular-expression
    search) has none, and in a block with some, each line made of spaces and delimiters is
    read by the csv module exactly as `records()` reads it. Any other file is counted by
    `records()` itself, so quoted newlines, malformed lines and lines that are not UTF-8
    count alike.
    """
    with open(path, "rb") as raw:
        header = parse_header(raw.readline(HEADER_SNIFF_BYTES))
        raw.seek(0)
        delimiter = re.escape(header.delimiter)
        may_start_blank = re.compile(rf"\n[\s{delimiter}]")
        maybe_blank = re.compile(rf"^[^\S\n]*(?:{delimiter}[^\S\n]*)*$", re.M)
        count = -1  # the header line
        for text in _Lines(raw).blocks():
            if text is None or '"' in text:
                return sum(1 for _ in records(path))
            count += text.count("\n") + (not text.endswith("\n"))
            if not (text[:1].isspace() or text[:1] == header.delimiter
                    or may_start_blank.search(text)):
                continue
            for match in maybe_blank.finditer(text):
                if match.start() == len(text):
                    continue  # after the block's last line: not a line
                line = text[match.start():match.end() + 1]
                try:
                    fields = next(csv.reader([line], delimiter=header.delimiter))
                except csv.Error:
                    continue  # a malformed record: counted
                if not any(f.strip() for f in fields):
                    count -= 1
        return max(count, 0)
