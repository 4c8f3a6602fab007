"""Attachments: which files may be sent, what they are, and how they are stored.

A file is allowed by its kind, and its kind is decided here from the file's own bytes, never
from the upload's word: the name's extension says what the owner means it to be, and the bytes
must be that (a `.pdf` that is not a PDF is refused, whatever Content-Type came with it). The
content type sent with it is ours, from `KINDS`.

- PDF (`%PDF-` in the first KiB, as readers look for it), PNG, JPEG, GIF, WebP by their
  signatures;
- Office Open XML (docx, xlsx, pptx): a ZIP whose `[Content_Types].xml` and main part are
  those of the kind; OpenDocument (odt, ods, odp): a ZIP whose `mimetype` member names it;
- legacy Word and Excel (doc, xls): an OLE2 compound file whose directory names the stream
  each keeps its content in (`WordDocument`, `Workbook` or `Book`);
- calendar (ics): UTF-8 text from `BEGIN:VCALENDAR` to `END:VCALENDAR`; text (txt, csv):
  UTF-8 without control characters other than tab, line ends and form feed.

A message carries at most `MAX_TOTAL` bytes of attachments in all (10 MB: what most receivers
take after base64's third is added is about 14 MB, under Gmail's and Outlook's 20-25 MB). Names
are the reader's: one file name, no folders, no control or direction-changing characters.
"""

from __future__ import annotations

import hashlib
import io
import unicodedata
import zipfile
from dataclasses import dataclass

from babel.numbers import format_decimal
from babel.support import LazyProxy
from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core.errors import NotFound, ValidationError
from broadside.core.i18n import _, _l, current_locale, ngettext
from broadside.core.models import Attachment
from broadside.core.models.attachments import MAX_ATTACHMENT_NAME

MAX_TOTAL = 10 * 1024 * 1024  # bytes of attachments per message, all of them together
MAX_COUNT = 20  # attachments per message


@dataclass(frozen=True)
class Kind:
    label: LazyProxy  # what the owner is told it is (str() it where a str is needed)
    content_type: str


KINDS: dict[str, Kind] = {
    "pdf": Kind(_l("PDF"), "application/pdf"),
    "png": Kind(_l("PNG image"), "image/png"),
    "jpeg": Kind(_l("JPEG image"), "image/jpeg"),
    "gif": Kind(_l("GIF image"), "image/gif"),
    "webp": Kind(_l("WebP image"), "image/webp"),
    "ics": Kind(_l("calendar event"), "text/calendar"),
    "txt": Kind(_l("text"), "text/plain"),
    "csv": Kind(_l("CSV table"), "text/csv"),
    "docx": Kind(_l("Word document"),
                 "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    "xlsx": Kind(_l("Excel spreadsheet"),
                 "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    "pptx": Kind(_l("PowerPoint presentation"),
                 "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    "odt": Kind(_l("OpenDocument text"), "application/vnd.oasis.opendocument.text"),
    "ods": Kind(_l("OpenDocument spreadsheet"), "application/vnd.oasis.opendocument.spreadsheet"),
    "odp": Kind(_l("OpenDocument presentation"), "application/vnd.oasis.opendocument.presentation"),
    "doc": Kind(_l("Word 97-2003 document"), "application/msword"),
    "xls": Kind(_l("Excel 97-2003 spreadsheet"), "application/vnd.ms-excel"),
}
# The extensions a name may end with, and the kind each promises.
EXTENSIONS = {**{name: name for name in KINDS}, "jpg": "jpeg", "jpe": "jpeg", "ical": "ics",
              "text": "txt"}
ALLOWED_WORDS = _l("PDF, images (PNG, JPEG, GIF, WebP), calendar (.ics), text (.txt, .csv) and "
                   "office documents (.docx, .xlsx, .pptx, .odt, .ods, .odp, .doc, .xls)")

_OOXML_MAIN = {  # the part each kind's [Content_Types].xml declares as its main document
    "docx": b"wordprocessingml.document.main+xml",
    "xlsx": b"spreadsheetml.sheet.main+xml",
    "pptx": b"presentationml.presentation.main+xml",
}
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_OLE_STREAMS = {"doc": ("WordDocument",), "xls": ("Workbook", "Book")}
_TEXT_CONTROLS = {"\t", "\n", "\r", "\f"}


def megabytes(size: int) -> str:
    """A size as the owner reads it: "2.4 MB", "310 KB", "12 bytes"."""
    if size >= 1024 * 1024:
        return _("%(size)s MB", size=format_decimal(size / (1024 * 1024), "#,##0.0",
                                                    locale=current_locale()))
    if size >= 1024:
        return _("%(size)s KB", size=format_decimal(max(1, round(size / 1024)),
                                                    locale=current_locale()))
    return ngettext("%(num)s byte", "%(num)s bytes", size)


def clean_name(raw: str) -> str:
    """The file name as the reader will see it: NFC, surrounding spaces trimmed, inner runs
    of spaces made one. Refused (ValidationError, field `file`): a name with folders in it,
    control or direction-changing characters (which can make `txt.exe` read as `exe.txt`), no
    name at all, or one longer than MAX_ATTACHMENT_NAME characters."""
    name = unicodedata.normalize("NFC", raw or "")
    if "/" in name or "\\" in name:
        raise ValidationError(_("Give the file's name alone, without folders (no / or \\)."),
                              field="file")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in name):
        raise ValidationError(_("The file's name has control or invisible characters; rename "
                                "the file and upload it again."), field="file")
    name = " ".join(name.split())
    if not name or name.strip(".") == "":
        raise ValidationError(_("The file needs a name, such as programme.pdf."), field="file")
    if len(name) > MAX_ATTACHMENT_NAME:
        raise ValidationError(_("The file's name is at most %(limit)s characters.",
                                limit=MAX_ATTACHMENT_NAME), field="file")
    return name


def kind_of(name: str, data: bytes) -> str:
    """The kind (a key of KINDS) that the name promises and the bytes are; ValidationError
    when the name's extension is not allowed, or the bytes are not what it promises."""
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    wanted = EXTENSIONS.get(extension)
    if wanted is None:
        if extension:
            raise ValidationError(_("Broadside does not send .%(extension)s files. Attachments "
                                    "may be %(allowed)s.", extension=extension,
                                    allowed=ALLOWED_WORDS), field="file")
        raise ValidationError(_("Broadside does not send a file whose name has no extension. "
                                "Attachments may be %(allowed)s.", allowed=ALLOWED_WORDS),
                              field="file")
    if not data:
        raise ValidationError(_("The file is empty."), field="file")
    found = _sniffed(data, wanted)
    if found != wanted:
        said = KINDS[found].label if found else _("none of the kinds Broadside sends")
        raise ValidationError(_("This file is named .%(extension)s but its content is not a "
                                "%(kind)s (it looks like %(said)s).", extension=extension,
                                kind=KINDS[wanted].label, said=said), field="file")
    return wanted


def _sniffed(data: bytes, wanted: str) -> str | None:
    """What the bytes are (a key of KINDS), or None; `wanted` settles only what bytes alone
    cannot (a text file is .txt or .csv)."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(data)
    if head.startswith(_OLE2):
        return _ole_kind(data)
    if b"%PDF-" in data[:1024]:
        return "pdf"
    return _text_kind(data, wanted)


def _zip_kind(data: bytes) -> str | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            if "mimetype" in names:
                declared = archive.read("mimetype")[:100].strip().decode("ascii", "replace")
                return next((k for k in ("odt", "ods", "odp")
                             if KINDS[k].content_type == declared), None)
            if "[Content_Types].xml" in names:
                types = archive.read("[Content_Types].xml")[:200_000]
                return next((k for k, main in _OOXML_MAIN.items() if main in types), None)
    except (zipfile.BadZipFile, KeyError, RuntimeError, NotImplementedError, ValueError, OSError):
        return None
    return None


def _ole_kind(data: bytes) -> str | None:
    """A compound file's directory entries are UTF-16LE names; the stream each kind keeps its
    content in is how Word and Excel themselves tell them apart."""
    for kind, streams in _OLE_STREAMS.items():
        if any(stream.encode("utf-16-le") + b"\x00\x00" in data for stream in streams):
            return kind
    return None


def _text_kind(data: bytes, wanted: str) -> str | None:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    if any(ch < " " and ch not in _TEXT_CONTROLS or ch == "\x7f" for ch in text):
        return None
    if wanted == "ics":
        upper = text.upper()
        calendar = upper.lstrip().startswith("BEGIN:VCALENDAR") and "END:VCALENDAR" in upper
        return "ics" if calendar else "txt"
    return wanted if wanted in ("txt", "csv") else "txt"


def store(session: Session, *, name: str, data: bytes, uploaded_by: int | None) -> Attachment:
    """A checked file stored (committed): its name cleaned, its kind decided from its bytes,
    at most MAX_TOTAL bytes (a message carries no more)."""
    name = clean_name(name)
    if len(data) > MAX_TOTAL:
        raise ValidationError(_("The file is %(size)s; a message carries at most %(limit)s of "
                                "attachments.", size=megabytes(len(data)),
                                limit=megabytes(MAX_TOTAL)), field="file")
    kind = kind_of(name, data)
    attachment = Attachment(name=name, content_type=KINDS[kind].content_type, size=len(data),
                            sha256=hashlib.sha256(data).hexdigest(), data=data,
                            uploaded_by=uploaded_by)
    session.add(attachment)
    session.commit()
    return attachment


def get_attachment(session: Session, attachment_id: int) -> Attachment:
    found = session.get(Attachment, attachment_id) if 0 < attachment_id < 2**31 else None
    if found is None:
        raise NotFound(f"There is no attachment {attachment_id}.")
    return found


def described(session: Session, ids: list[int]) -> list[Attachment]:
    """The attachments with these ids, in this order (their bytes not loaded); missing ones
    left out."""
    if not ids:
        return []
    rows = {a.id: a for a in session.scalars(select(Attachment).where(Attachment.id.in_(ids)))}
    return [rows[i] for i in ids if i in rows]


def label_of(content_type: str) -> str:
    """The kind's name for the owner ("PDF", "Word document")."""
    return next((str(k.label) for k in KINDS.values() if k.content_type == content_type),
                content_type)
