"""What one record of an import file becomes: the person, with a warning for each value
changed to import them (a name longer than the column is shortened), or the reason, in words
the owner can act on, that the record cannot be imported. No database, no file: the reading
is `broadside.audience.transfer.csvfile`'s.

A cell the export protected against spreadsheet formulas (a leading apostrophe before `=`,
`+`, `-`, `@`) is read back as it was (`unescape_cell`), so an exported file imports as is.
An export's `status` and `suppression` columns are read into the record (what the importer
does with them is its own: a person the file says left, or is suppressed, is not put on the
list); a value the import does not know there rejects the row, so nothing is guessed. So
does the `locale` column (also `language` or `lang`): a language tag sets the reader's
language, an empty cell leaves it as it is, anything else rejects the row; and the
`timezone` column (also `time_zone` or `tz`): an IANA name the server knows sets the reader's
time zone, an empty cell leaves it, anything else rejects the row.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from broadside.audience.subscribers.service import MAX_ATTRIBUTE_VALUE, MAX_EMAIL, MAX_NAME
from broadside.audience.subscribers.time_zone import browser_timezone
from broadside.audience.transfer.csvfile import ATTRIBUTE_PREFIX, FORMULA_PREFIXES, Header
from broadside.core.addresses import needs_smtputf8, normalise_email
from broadside.core.errors import ValidationError
from broadside.core.i18n import clean_locale
from broadside.core.models.audience import SUBSCRIPTION_STATUSES, SUPPRESSIONS

# A row whose address needs SMTPUTF8 (RFC 6531): imported, with this warning; the report
# names the sending identities that cannot reach such addresses (report.smtputf8_rows).
SMTPUTF8_WARNING = ("the address has characters outside ASCII before the @, so it needs "
                    "SMTPUTF8, which not every sending identity offers")

def unescape_cell(value: str) -> str:
    """The cell as it was before the export's apostrophe (`export.safe_cell`'s reverse)."""
    if len(value) > 1 and value[0] == "'" and value[1:].lstrip("'").startswith(FORMULA_PREFIXES):
        return value[1:]
    return value


# What an export's `status` and `suppression` columns may say ("": nothing said).
FILE_STATUSES = ("", *SUBSCRIPTION_STATUSES)
FILE_SUPPRESSIONS = ("", *SUPPRESSIONS)


def _column_value(fields: list[str], index: int | None, column: str,
                  allowed: tuple[str, ...]) -> str:
    if index is None or index >= len(fields):
        return ""
    value = fields[index].strip().lower()
    if value not in allowed:
        raise ValidationError(
            f"the {column} column says {fields[index].strip()[:40]!r}: an import reads "
            f"{', '.join(allowed[1:-1])} or {allowed[-1]} there, or nothing (to keep it as an "
            f"attribute, call the column {ATTRIBUTE_PREFIX + column!r})")
    return value


# A dot-atom local part of plain ASCII letters, digits, _ + and -: RFC 5322 says what is valid
# here without the validator's help (no quoting, no Unicode, no dot at either end or twice);
# then the only "@" and the domain, in an address already lower-cased.
_PLAIN_ADDRESS = re.compile(r"([a-z0-9_+-]+(?:\.[a-z0-9_+-]+)*)@[^@]*\Z")


class EmailNormaliser:
    """`normalise_email`, with each domain's verdict remembered for the rest of the file.

    Validating the domain is most of email_validator's cost (about 50 µs an address, half
    the 10 s budget of a 100,000-row import) and a list has few distinct domains. Only a plain
    local part on a domain the validator itself accepted takes the short way; everything else
    (and every error message) comes from `normalise_email`. The domain is remembered as
    written (case and all), so its verdict is the validator's own for that very text.
    """

    def __init__(self, max_domains: int = 50_000) -> None:
        # domain as written -> (its normalised form, or None when the validator refused it;
        # whether that form is the domain lower-cased)
        self.domains: dict[str, tuple[str | None, bool]] = {}
        self.max_domains = max_domains

    def __call__(self, raw: str) -> str:
        raw = raw.strip()
        if raw.isascii() and len(raw) <= 200:
            lowered = raw.lower()
            plain = _PLAIN_ADDRESS.match(lowered)
            if plain is not None and plain.end(1) <= 64:
                domain = raw[plain.end(1) + 1:]
                verdict = self.domains.get(domain)
                if verdict is None:
                    verdict = self._domain(domain)
                known, same = verdict
                if same:
                    return lowered
                if known is not None:
                    return f"{lowered[:plain.end(1)]}@{known}"
        return normalise_email(raw)

    def _domain(self, domain: str) -> tuple[str | None, bool]:
        try:
            known: str | None = normalise_email("x@" + domain).split("@", 1)[1]
        except ValidationError:
            known = None
        verdict = (known, known == domain.lower())
        if len(self.domains) < self.max_domains:
            self.domains[domain] = verdict
        return verdict


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
    # What the file's `status` and `suppression` columns say ("": nothing, or no such column).
    status: str = ""
    suppression: str = ""
    # The file's language tag for them (None: no column, or an empty cell).
    locale: str | None = None
    # The file's time zone for them (None: no column, or an empty cell).
    timezone: str | None = None

    def settings(self) -> list[tuple[str, str]]:
        """(column of `subscribers`, value) the file sets for them beyond name and attributes."""
        return [(column, value) for column, value in (("locale", self.locale),
                                                      ("timezone", self.timezone)) if value]


def _locale_value(header: Header, fields: list[str]) -> str | None:
    index = header.locale_index
    if index is None or index >= len(fields):
        return None
    value = fields[index].strip()
    if not value:
        return None
    found = clean_locale(value)
    if found is None:
        raise ValidationError(
            f"the {header.columns[index]} column says {value[:40]!r}, which is not a language "
            "tag (such as de, fr or pt-BR); leave it empty for the list's default")
    return found


def _timezone_value(header: Header, fields: list[str]) -> str | None:
    index = header.timezone_index
    if index is None or index >= len(fields):
        return None
    value = fields[index].strip()
    if not value:
        return None
    found = browser_timezone(value)
    if found is None:
        raise ValidationError(
            f"the {header.columns[index]} column says {value[:40]!r}, which is not a time zone "
            "this server knows (such as Europe/Berlin or America/New_York); leave it empty for "
            "none")
    return found


def validate_record(header: Header, fields: list[str],
                    normalise: Callable[[str], str] = normalise_email) -> Accepted:
    """The person in one record, with a warning for each value changed to import them; or
    ValidationError with the reason the record cannot be imported.

    Called once per row of a million-row file, so written out flat: each cell is read as
    `fields[i].strip()` then `unescape_cell` (a missing cell is ""), without a call per cell."""
    count = len(fields)
    if count > len(header.columns):
        raise ValidationError(
            f"the row has {count} fields but the header has {len(header.columns)}"
        )
    if "\x00" in "".join(fields):  # PostgreSQL refuses NUL in text
        raise ValidationError("a NUL character in the row")

    index = header.email_index
    raw_email = fields[index].strip() if index < count else ""
    if raw_email[:1] == "'":
        raw_email = unescape_cell(raw_email)
    if not raw_email:
        raise ValidationError("missing email address")
    if len(raw_email) > MAX_EMAIL:
        raise ValidationError(f"email address longer than {MAX_EMAIL} characters")
    email = normalise(raw_email)
    warnings = [SMTPUTF8_WARNING] if needs_smtputf8(email) else []
    name_index = header.name_index
    if name_index is None or name_index >= count:
        name = ""
    else:
        name = fields[name_index].strip()
        if name[:1] == "'":
            name = unescape_cell(name)
        name = " ".join(name.split())
        if len(name) > MAX_NAME:
            warnings.append(f"name shortened to {MAX_NAME} characters (it had {len(name):,})")
            name = shorten(name, MAX_NAME)
    attributes: dict[str, str] = {}
    for index, key in header.attribute_columns:
        if index >= count:
            continue
        value = fields[index].strip()
        if value[:1] == "'":
            value = unescape_cell(value)
        if len(value) > MAX_ATTRIBUTE_VALUE:
            raise ValidationError(
                f"the value in column {key!r} is longer than {MAX_ATTRIBUTE_VALUE} characters"
            )
        if value:
            attributes[key] = value
    locale = None if header.locale_index is None else _locale_value(header, fields)
    zone = None if header.timezone_index is None else _timezone_value(header, fields)
    if header.status_index is None and header.suppression_index is None:
        return Accepted(email, name, attributes, warnings, locale=locale, timezone=zone)
    return Accepted(email, name, attributes, warnings,
                    _column_value(fields, header.status_index, "status", FILE_STATUSES),
                    _column_value(fields, header.suppression_index, "suppression",
                                  FILE_SUPPRESSIONS), locale, zone)
