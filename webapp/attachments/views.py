"""The attachments field of the broadcast editor, an automation's steps and a transactional
template: upload a file (HTMX, answered with the field redrawn: the list with the new file, or
the refusal under it, what was attached kept), remove one (static/attachments.js, no request:
the list is saved with the form), and the field's figures.

The field posts its ids with its form as `<field>` values (`attachment`, or
`step-<n>-attachment`), read by `posted_ids`; the upload carries the file as `<field>-file`.
Uploading needs what saving the form needs: `write` for a broadcast or a step, `manage` for a
transactional template (its own route).
"""

from __future__ import annotations

import re
from typing import Any

from flask import render_template, request
from flask_login import current_user

from broadside.core import roles
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.mail import attachment_use
from broadside.mail.attachments import MAX_TOTAL, described, label_of, megabytes, store
from webapp.attachments import bp
from webapp.extensions import db
from webapp.permissions import allow

_ID = re.compile(r"[0-9]{1,9}")
_FIELD = re.compile(r"attachment|step-[0-9]{1,2}-attachment")


def posted_ids(name: str = "attachment") -> list[int] | None:
    """The ids the form's attachments field posted, in order; None when the form had no such
    field (a form drawn before it existed leaves the attachments as they are)."""
    if f"{name}-present" not in request.form:
        return None
    return [int(v) for v in request.form.getlist(name) if _ID.fullmatch(v)]


def save_draft_attachments(broadcast_id: int) -> None:
    """The broadcast editor's posted attachments saved on the draft (checked), when its form
    had the field."""
    ids = posted_ids()
    if ids is not None:
        attachment_use.attach_to_draft(db.session, broadcast_id, ids)


def field_of(ids: list[int] | None, *, name: str = "attachment", bulk: bool = False,
             error: str | None = None, template: bool = False) -> dict[str, Any]:
    """What the field's template draws: the files (name, size, kind), their total against the
    limit, the refusal if any."""
    files = described(db.session, list(ids or []))
    total = sum(f.size for f in files)
    return {"name": name, "bulk": bulk, "error": error, "template": template,
            "files": [{"id": f.id, "name": f.name, "size": f.size, "shown_size": megabytes(f.size),
                       "kind": label_of(f.content_type)} for f in files],
            "total": total, "shown_total": megabytes(total), "limit": megabytes(MAX_TOTAL),
            "limit_bytes": MAX_TOTAL, "over": total > MAX_TOTAL}


@bp.app_context_processor
def _helpers() -> dict[str, Any]:
    return {"attachments_field": field_of}


def _upload(template: bool):
    name = request.form.get("field", "attachment")
    if not _FIELD.fullmatch(name):
        name = "attachment"
    bulk = request.form.get("bulk") == "1"
    ids = [int(v) for v in request.form.getlist(name) if _ID.fullmatch(v)]
    upload = request.files.get(f"{name}-file")
    error = None
    status = 200
    try:
        if upload is None or not upload.filename:
            raise ValidationError(_("Choose a file first."), field="file")
        data = upload.read(MAX_TOTAL + 1)
        attachment_use.room_for(db.session, ids, len(data))
        attachment = store(db.session, name=upload.filename, data=data,
                           uploaded_by=current_user.id)
        ids.append(attachment.id)
    except ValidationError as exc:
        db.session.rollback()
        error, status = exc.message, 422
    return render_template("attachments/_field.html",
                           a=field_of(ids, name=name, bulk=bulk, error=error, template=template)
                           ), status


@bp.route("/upload", methods=["POST"])
@allow(roles.WRITE)
def upload():
    """A file for a broadcast or an automation step."""
    return _upload(template=False)


@bp.route("/upload-for-template", methods=["POST"])
@allow(roles.MANAGE)
def upload_for_template():
    """A file for a transactional template (whose page needs `manage` to change)."""
    return _upload(template=True)
