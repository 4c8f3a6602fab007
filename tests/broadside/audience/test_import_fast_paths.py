"""The importer's fast paths give exactly what the plain code gives, for every input.

A million-row import reads blocks instead of lines, counts rows without parsing them when it
can, validates a row without a call per cell, takes a short way for plain addresses on a
domain already seen, and writes a row's attributes as JSON without `json.dumps`. Each is
compared here with the straightforward version it replaced (kept below as the reference, or
the library's own), on generated and tricky inputs: block and line-length limits
made tiny so every boundary is crossed, quotes, CR and CRLF, blank rows, bad UTF-8, a BOM;
IDN, quoted local parts, case, dots, whitespace and Unicode in addresses.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from broadside.audience.subscribers.service import MAX_ATTRIBUTE_VALUE, MAX_EMAIL, MAX_NAME
from broadside.audience.transfer import batch as import_batch
from broadside.audience.transfer import csvfile, people
from broadside.audience.transfer.csvfile import Header, count_records, parse_header, records
from broadside.audience.transfer.people import EmailNormaliser, unescape_cell, validate_record
from broadside.core.addresses import normalise_email
from broadside.core.errors import ValidationError

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# ---------------------------------------------------------------- the references


class _ReferenceLines:
    """The line-by-line reader the block reader replaced."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.number = 0
        self.bad: dict[int, str] = {}

    def __iter__(self) -> Iterator[str]:
        for chunk, too_long in csvfile._bounded_lines(self.raw):
            self.number += 1
            if too_long:
                self.bad[self.number] = csvfile.LINE_TOO_LONG
            if self.number == 1 and chunk.startswith(codecs.BOM_UTF8):
                chunk = chunk[len(codecs.BOM_UTF8):]
            try:
                yield chunk.decode("utf-8")
            except UnicodeDecodeError:
                self.bad[self.number] = csvfile.NOT_UTF8
                yield chunk.decode("utf-8", "replace")


def reference_records(path: Path) -> list[tuple[int, list[str] | None, str | None]]:
    out = []
    with open(path, "rb") as raw:
        header = parse_header(raw.readline(csvfile.HEADER_SNIFF_BYTES))
        raw.seek(0)
        lines = _ReferenceLines(raw)
        reader = csv.reader(iter(lines), delimiter=header.delimiter)
        next(reader, None)
        end = reader.line_num
        while True:
            start = end + 1
            try:
                fields = next(reader)
            except StopIteration:
                return out
            except csv.Error as exc:
                end = reader.line_num
                out.append((start, None, csvfile.malformed_words(exc)))
                continue
            end = reader.line_num
            if lines.bad:
                reasons = [lines.bad.pop(n) for n in range(start, end + 1) if n in lines.bad]
                if reasons:
                    out.append((start, None if csvfile.LINE_TOO_LONG in reasons else fields,
                                reasons[0]))
                    continue
            if not any(f.strip() for f in fields):
                continue
            out.append((start, fields, None))


def reference_validate(header: Header, fields: list[str], normalise=normalise_email):
    """validate_record as it was, a call per cell."""
    if len(fields) > len(header.columns):
        raise ValidationError(
            f"the row has {len(fields)} fields but the header has {len(header.columns)}")
    if any("\x00" in field for field in fields):
        raise ValidationError("a NUL character in the row")

    def cell(index):
        if index is None or index >= len(fields):
            return ""
        return unescape_cell(fields[index].strip())

    raw_email = cell(header.email_index)
    if not raw_email or len(raw_email) > MAX_EMAIL:
        raise ValidationError("missing email address" if not raw_email
                              else f"email address longer than {MAX_EMAIL} characters")
    email, warnings = normalise(raw_email), []
    name = " ".join(cell(header.name_index).split())
    if len(name) > MAX_NAME:
        warnings.append(f"name shortened to {MAX_NAME} characters (it had {len(name):,})")
        name = people.shorten(name, MAX_NAME)
    attributes = {}
    for index, key in header.attribute_columns:
        value = cell(index)
        if len(value) > MAX_ATTRIBUTE_VALUE:
            raise ValidationError(
                f"the value in column {key!r} is longer than {MAX_ATTRIBUTE_VALUE} characters")
        if value:
            attributes[key] = value
    return (email, name, attributes, warnings)


def outcome(function, *args):
    try:
        result = function(*args)
    except ValidationError as exc:
        return ("error", exc.message)
    if isinstance(result, people.Accepted):
        return (result.email, result.name, result.attributes, result.warnings)
    return result


# ---------------------------------------------------------------- addresses

LOCAL = st.text(alphabet="aZ09._+-!#é'\" \t()[]<>,;:@\\xnK\u212a\u0130.", max_size=14)
DOMAINS = ["example.com", "EXAMPLE.com", "Example.COM", "example.com.", "x.test", "localhost",
           "-a.com", "a_b.com", "xn--80ak6aa92e.com", "XN--80AK6AA92E.COM", "exa mple.com", "",
           "1.2.3.4", "[1.2.3.4]", "b\u00fccher.de", "B\u00dcCHER.de", "a..b.com", "co",
           "example.invalid", "\u0441\u0430\u0439\u0442.\u0440\u0444", "a.b-.com",
           "x" * 64 + ".com", ("a" * 63 + ".") * 4 + "com", "example.com ", "ex\u200bample.com"]


@FAST
@given(local=LOCAL, domain=st.sampled_from(DOMAINS),
       padding=st.sampled_from(["", " ", "\t", "\u00a0", "\u3000"]))
@example(local='"quoted local"', domain="example.com", padding="")
@example(local="Upper.Case", domain="EXAMPLE.COM", padding=" ")
@example(local="trailing.", domain="example.com", padding="")
@example(local="a" * 64, domain="example.com", padding="")
@example(local="a" * 65, domain="example.com", padding="")
@example(local="a" * 60, domain="b" * 63 + "." + "c" * 63 + ".com", padding="")
@example(local="\u212aelvin", domain="example.com", padding="")
def test_the_fast_address_path_agrees_with_normalise_email(local, domain, padding):
    raw = f"{padding}{local}@{domain}{padding}"
    expected = outcome(normalise_email, raw)
    normalise = EmailNormaliser()
    for _ in range(2):  # the second call uses the remembered domain
        assert outcome(normalise, raw) == expected
    # and a domain first seen in another case or with another local part changes nothing
    other = EmailNormaliser()
    outcome(other, f"someone@{domain.upper()}")
    outcome(other, f"someone@{domain}")
    assert outcome(other, raw) == expected


@FAST
@given(st.text(max_size=40))
def test_any_text_as_an_address_gives_what_normalise_email_gives(raw):
    normalise = EmailNormaliser()
    assert outcome(normalise, raw) == outcome(normalise_email, raw)
    assert outcome(normalise, raw) == outcome(normalise_email, raw)


# ---------------------------------------------------------------- staging a row


@FAST
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=6))
@example({})
@example({"city": "Z\u00fcrich", "q": '"\\\n\t\x00\ud800', "\U0001f600": "\u2028"})
def test_a_rows_attributes_are_staged_as_json_dumps_writes_them(attributes):
    assert import_batch.attributes_json(attributes) == json.dumps(attributes)


# ---------------------------------------------------------------- validating a row

CELL = st.one_of(
    st.sampled_from(["", " ", "a@example.com", " A@Example.COM ", "'=1+1", "'@x", "'+33 1",
                     "' x", "x\x00y", "Ann  Lee", "  Bo\tKay ", "'", "''", "\u00e9t\u00e9",
                     "bad@", "@x.com", "a@b\u00fccher.de", "x" * (MAX_NAME + 3),
                     "y" * (MAX_ATTRIBUTE_VALUE + 1), "z" * MAX_ATTRIBUTE_VALUE,
                     "e" * (MAX_EMAIL - 12) + "@example.com", "'\ta@example.com"]),
    st.text(max_size=12))


@FAST
@given(columns=st.sampled_from(["email,name,city,plan", "name,email", "email", "city,Email,Name",
                                "email,,city", "email,city,name,rejected_line,rejected_reason"]),
       fields=st.lists(CELL, max_size=7))
def test_validating_a_row_gives_what_the_plain_validation_gave(columns, fields):
    header = parse_header(columns.encode() + b"\n")
    assert (outcome(validate_record, header, fields, EmailNormaliser())
            == outcome(reference_validate, header, fields))


# ---------------------------------------------------------------- reading and counting

PIECE = st.sampled_from([
    "a@example.com,Ann,Paris\n", "b@example.com,Bo,Oslo\r\n", "\n", "\r\n", " , ,\n", ",,\n",
    "\t\n", " \r \n", "\r\r\n", "x\ry,1\n", '"q@example.com","Lee, Ann",x\n',
    '"multi\nline@example.com",n\n', '"open quote,\n', 'a"b,c\n', "\u00e9@example.com,\u00e9\n",
    "\u3000,\u3000\n", "\x1c,\x1f\n", "bad\xff", "c@example.com,\xc3\n", "long" * 30 + "\n",
    "\x00,x\n", ",Ann,Paris\n", " ,x\n", "\t, ,\u00a0y\n", "tail-without-newline",
])


def _file(tmp_path: Path, header: str, pieces: list[str], bom: bool) -> Path:
    path = tmp_path / "rows.csv"
    body = "".join(pieces).encode("utf-8", "surrogateescape")
    # "\xff" and "\xc3" above stand for bytes that are not UTF-8
    body = body.replace("\xff".encode(), b"\xff").replace("\xc3\n".encode(), b"\xc3\n")
    path.write_bytes((codecs.BOM_UTF8 if bom else b"") + header.encode() + b"\n" + body)
    return path


@FAST
@given(header=st.sampled_from(["email,name,city", "email;name", "email\tname"]),
       pieces=st.lists(PIECE, max_size=25), bom=st.booleans(),
       block=st.sampled_from([16, 37, 64, 256 * 1024]),
       max_line=st.sampled_from([48, 100, 1024 * 1024]))
def test_the_block_reader_and_the_count_agree_with_the_line_reader(
        tmp_path_factory, monkeypatch, header, pieces, bom, block, max_line):
    monkeypatch.setattr(csvfile, "BLOCK_BYTES", min(block, max_line - 1))
    monkeypatch.setattr(csvfile, "MAX_LINE_BYTES", max_line)
    path = _file(tmp_path_factory.mktemp("rows"), header, pieces, bom)
    expected = reference_records(path)
    assert list(records(path)) == expected
    assert count_records(path) == len(expected)


@pytest.mark.parametrize("body", [
    "", "\n", "a@example.com\n" * 3, "a@example.com\n\n \n,\nb@example.com",
    "a@example.com\r\n\r\n", " , \n" * 5, "a@example.com\n\u2028\n\u0085,\n",
    "x\ry\n \r \n", "a@example.com,\u00a0\n\u00a0\n",
])
def test_the_count_of_unquoted_files_with_blank_rows_is_exact(tmp_path, monkeypatch, body):
    monkeypatch.setattr(csvfile, "BLOCK_BYTES", 8)
    path = tmp_path / "rows.csv"
    path.write_text("email,name\n" + body, encoding="utf-8")
    assert count_records(path) == len(reference_records(path))


def test_the_block_is_shorter_than_the_longest_line_read():
    # A clean block's lines are never "too long" only because a block is shorter than that.
    assert csvfile.BLOCK_BYTES < csvfile.MAX_LINE_BYTES


def test_a_record_csv_cannot_read_is_refused_in_the_owners_words(tmp_path):
    """Python's csv message ("new-line character seen in unquoted field - do you need to open
    the file with newline=''?") speaks to a programmer; the import's page shows the reason."""
    path = tmp_path / "broken.csv"
    path.write_bytes(b"email,name\na@example.com,b\rc,d\nb@example.com,Bo\n")
    rejected = [(line, reason) for line, fields, reason in records(path) if reason]
    assert rejected == [(2, "malformed CSV: a line break inside a cell that is not in double "
                            "quotes; save the file again as CSV from your spreadsheet")]
    assert "newline=" not in rejected[0][1]
