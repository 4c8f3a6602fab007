"""Attachments over the API (described in `webapp/apidocs/attachments.py`, held by
tests/webapp/test_api_attachments.py).

- POST /api/attachments, multipart with the file in the part named `file` (a filename or
  not; the name is the part's filename, or the form field `name`) -> 201 Attachment. The
  type is decided from the file's content and an allowed list; 422 names what is wrong (a
  `.pdf` that is not a PDF, a name with folders, a file over 10 MB).
- GET /api/attachments/<id> -> 200 Attachment (its metadata; the bytes are only sent).
- DELETE /api/attachments/<id> -> 204; 409 while a broadcast, step, template or a revision of
  one names it.

An Attachment is {"id", "name", "size", "content_type", "sha256", "created_at"}. Put its id in
`"attachments": [id, …]` of a broadcast (POST, PATCH), an automation's step or a
transactional template. Uploading needs `write`; attaching to a template needs what changing
the template needs (`manage`).
"""

from __future__ import annotations

from typing import Any

from flask import g, jsonify

from broadside.core import roles
from broadside.core.errors import ValidationError
from broadside.core.models import Attachment
from broadside.mail import attachment_use
from broadside.mail.attachments import MAX_TOTAL, get_attachment, megabytes, store
from webapp.api import bp
from webapp.api.inputs import iso
from webapp.api.multipart import read_upload
from webapp.extensions import db
from webapp.permissions import allow
from webapp.text_input import reads_own_body


def attachment_json(attachment: Attachment) -> dict[str, Any]:
    return {"id": attachment.id, "name": attachment.name, "size": attachment.size,
            "content_type": attachment.content_type, "sha256": attachment.sha256,
            "created_at": iso(attachment.created_at)}


@bp.route("/attachments", methods=["POST"])
@allow(roles.WRITE)
@reads_own_body  # streamed by read_upload, which applies the text rule to its parts
def api_upload_attachment():
    with read_upload("file") as upload:
        if upload.file is None:
            raise ValidationError('Send the file as a multipart form field named "file".',
                                  field="file")
        data = upload.file.read(MAX_TOTAL + 1)
        if len(data) > MAX_TOTAL:
            raise ValidationError(f"The file is over {megabytes(MAX_TOTAL)}, the most a "
                                  "message carries.", field="file")
        name = upload.filename or upload.fields.get("name", "")
        attachment = store(db.session, name=name, data=data,
                           uploaded_by=g.api_token.owner_id)
    return jsonify(attachment_json(attachment)), 201


@bp.route("/attachments/<int:attachment_id>", methods=["GET"])
def api_attachment(attachment_id: int):
    return jsonify(attachment_json(get_attachment(db.session, attachment_id)))


@bp.route("/attachments/<int:attachment_id>", methods=["DELETE"])
@allow(roles.WRITE)
def api_delete_attachment(attachment_id: int):
    attachment_use.delete_attachment(db.session, attachment_id)
    return "", 204
