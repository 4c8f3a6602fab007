"""The import's multipart body, read so that the part named `file` is the CSV whether or not
its Content-Disposition carries a filename.

Werkzeug files a part under `request.files` only when it has a `filename`; without one (curl's
`-F 'file=<people.csv'`, and many HTTP libraries' plain fields) the CSV became a form field,
held in memory and decoded as text, and the import answered 'Send the CSV as a multipart form
field named "file"' though it had been sent. Here the part named `file` streams to a
temporary file either way, its bytes untouched (a line that is not UTF-8 is still the
importer's to reject), and every other part is a small text field (`welcome`, `consent`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from tempfile import SpooledTemporaryFile
from typing import IO

from flask import request
from werkzeug.datastructures import MultiDict
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

from broadside.core.errors import ValidationError
from webapp.text_input import refuse_in_parts

CHUNK = 64 * 1024
IN_MEMORY = 500 * 1024  # an upload past this spills to a temporary file, as Werkzeug's do
FIELD_BYTES = 1024  # every other part is a word or two
MAX_PARTS = 32


@dataclass
class Upload:
    file: IO[bytes] | None = None  # at its start; None when no part had the name
    filename: str = ""
    fields: MultiDict[str, str] = field(default_factory=MultiDict)

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.file is not None:
            self.file.close()


def read_upload(name: str) -> Upload:
    """The request's multipart parts: the first named `name` as a file (filename or not),
    the others as text fields. A body that is not multipart, or is malformed, has no file
    (the caller says what to send). Its size is bounded by the request's (MAX_CONTENT_LENGTH:
    Werkzeug raises RequestEntityTooLarge past it) and checked again by the importer."""
    boundary = request.mimetype_params.get("boundary", "")
    upload = Upload()
    if request.mimetype != "multipart/form-data" or not boundary:
        return upload
    decoder = MultipartDecoder(boundary.encode("latin-1"), max_parts=MAX_PARTS)
    spool: IO[bytes] = SpooledTemporaryFile(max_size=IN_MEMORY)  # returned open, or closed here
    into_file, text = False, bytearray()
    current: Field | File | None = None
    try:
        while True:
            chunk = request.stream.read(CHUNK)
            decoder.receive_data(chunk or None)
            event = decoder.next_event()
            while not isinstance(event, NeedData | Epilogue):
                if isinstance(event, Field | File):
                    current, text = event, bytearray()
                    into_file = event.name == name and upload.file is None and not spool.tell()
                    if into_file:
                        upload.filename = getattr(event, "filename", "") or ""
                elif isinstance(event, Data) and current is not None:
                    if into_file:
                        spool.write(event.data)
                        if not event.more_data:
                            upload.file, into_file = spool, False
                    elif current.name != name:
                        text += event.data
                        if len(text) > FIELD_BYTES:
                            raise ValidationError(f'The form field "{current.name}" is too long.')
                        if not event.more_data:
                            upload.fields.add(current.name, text.decode("utf-8", "replace"))
                event = decoder.next_event()
            if not chunk or isinstance(event, Epilogue):
                break
    except ValueError:  # not multipart as RFC 7578 writes it: no file was read
        spool.close()
        return Upload()
    except BaseException:
        spool.close()
        raise
    if upload.file is None:
        spool.close()
    else:
        upload.file.seek(0)
    try:  # the rule every other request gets before its view (webapp/text_input.py)
        refuse_in_parts(upload.fields.items(multi=True),
                        (name, upload.filename) if upload.file is not None else None)
    except ValidationError:
        upload.__exit__()
        raise
    return upload
