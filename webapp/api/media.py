"""The media library over the API (described in `webapp/apidocs/media.py`, held by
tests/webapp/test_api_media.py):

- POST /api/media (multipart: `file`, with or without a filename; `alt`) -> 201 Media; 200
  with the same image when this file was in the library already; 422 naming `file` or `alt`
  when it is not an image we take (over 10 MB, not a PNG/JPEG/GIF/WebP, damaged, a
  decompression bomb) or the alt text is too long
- GET /api/media?after=&limit= -> 200 {"items": [Media], "next"}: ascending id, `after` the
  previous page's `next`
- DELETE /api/media/<id> -> 204; 409 with `used_by` while a draft, a scheduled or sending
  broadcast, a live automation or a transactional template uses it

Media is {"id", "url", "url_2x", "width", "height", "alt", "name", "content_type", "bytes",
"animated", "created_at"}: `url` is what an email uses (MEDIA_URL's when set), `width` and
`height` the 1x image's (CSS pixels in the email).
"""

from __future__ import annotations

from flask import g, jsonify
from werkzeug.exceptions import RequestEntityTooLarge

from broadside.core.errors import ValidationError
from broadside.mail import media as library
from broadside.mail.media_images import MAX_UPLOAD_BYTES
from webapp.api import bp
from webapp.api.inputs import page_args, takes_query
from webapp.api.multipart import read_upload
from webapp.extensions import db
from webapp.media.files import media_json
from webapp.media.views import TOO_LARGE, design_width, upload_request_too_large
from webapp.permissions import allow
from webapp.text_input import reads_own_body

DEFAULT_PAGE, MAX_PAGE = 50, 200


@bp.route("/media", methods=["GET"])
@takes_query("after", "limit")
def api_media():
    after, limit = page_args(default_limit=DEFAULT_PAGE, max_limit=MAX_PAGE)
    rows, following = library.page_by_id(db.session, after=after or 0, limit=limit)
    return jsonify(items=[media_json(m) for m in rows], next=following)


@bp.route("/media", methods=["POST"])
@allow("write")
@takes_query(form_fields=("alt",))
@reads_own_body  # streamed by read_upload, which applies the text rule to its parts
def api_upload_media():
    if upload_request_too_large():
        raise ValidationError(TOO_LARGE, field="file")
    try:
        upload = read_upload("file")
    except RequestEntityTooLarge:
        raise ValidationError(TOO_LARGE, field="file") from None
    with upload:
        if upload.file is None:
            raise ValidationError('Send the image as a multipart form field named "file".',
                                  field="file")
        data = upload.file.read(MAX_UPLOAD_BYTES + 1)
        alt = upload.fields.get("alt", "")
    done = library.upload(db.session, data, filename=upload.filename, alt=alt,
                          design_width=design_width(), uploaded_by=g.api_token.owner_id)
    return jsonify(media_json(done.media)), 201 if done.created else 200


@bp.route("/media/<int:media_id>", methods=["DELETE"])
@allow("manage")
def api_delete_media(media_id: int):
    try:
        library.delete_media(db.session, media_id)
    except library.InUse as exc:
        return jsonify(error=exc.message, field="id", used_by=[
            {"kind": u.kind, "id": u.id, "title": u.title, "state": u.state}
            for u in exc.used_by]), 409
    return "", 204
