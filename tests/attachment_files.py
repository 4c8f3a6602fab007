"""Small real files of each kind an attachment may be, made in memory for the tests."""

from __future__ import annotations

import io
import zipfile

# A minimal but well-formed PDF (what readers open): header, one empty page, xref, trailer.
PDF = (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
       b"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
       b"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
       b"3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >> endobj\n"
       b"trailer << /Root 1 0 R >>\n%%EOF\n")
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
       b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N"
       b"\x00\x00\x00\x00IEND\xaeB`\x82")
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00/\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00"
ICS = (b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Broadside//test//EN\r\nBEGIN:VEVENT\r\n"
       b"UID:1@example.com\r\nDTSTAMP:20261205T100000Z\r\nDTSTART:20261210T180000Z\r\n"
       b"SUMMARY:Launch party\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
CSV = "name,city\nAnn,Zürich\n".encode()
TXT = b"Bring a coat.\n"


def office_open(kind: str) -> bytes:
    """A docx, xlsx or pptx: a ZIP with its [Content_Types].xml naming the main part."""
    main = {"docx": ("word/document.xml", "wordprocessingml.document.main+xml"),
            "xlsx": ("xl/workbook.xml", "spreadsheetml.sheet.main+xml"),
            "pptx": ("ppt/presentation.xml", "presentationml.presentation.main+xml")}[kind]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("[Content_Types].xml", (
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
            f'content-types"><Override PartName="/{main[0]}" ContentType="application/vnd.'
            f'openxmlformats-officedocument.{main[1]}"/></Types>'))
        archive.writestr(main[0], "<x/>")
    return out.getvalue()


def open_document(kind: str) -> bytes:
    """An odt, ods or odp: a ZIP whose first member `mimetype` names it."""
    name = {"odt": "text", "ods": "spreadsheet", "odp": "presentation"}[kind]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", f"application/vnd.oasis.opendocument.{name}")
        archive.writestr("content.xml", "<x/>")
    return out.getvalue()


def compound(stream: str) -> bytes:
    """An OLE2 compound file's header and a directory entry naming `stream` (as Word's
    `WordDocument` or Excel's `Workbook`), UTF-16LE and NUL-terminated as the format writes it."""
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)
    entry = (stream.encode("utf-16-le") + b"\x00\x00").ljust(64, b"\x00") + bytes(64)
    return header + entry
