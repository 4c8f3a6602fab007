"""The Media page and the picker's requests.

- GET  /media/              the library: search by name or alt text, each image's size,
                            dimensions and where it is used; upload (pick, drop or paste)
- POST /media/              upload (a form, or the picker's fetch asking for JSON)
- GET  /media/library.json  the picker's list (newest first, `q`, `before`)
- POST /media/<id>/alt      edit the alt text
- GET, POST /media/<id>/delete   confirm, then delete (refused while something still sends it)

`images_without_alt(broadcast)` is for the send confirmation's card (templates/broadcasts/
_confirm_images.html): the images of the draft's body, as it would be sent, without alt text.
"""

from __future__ import annotations

from typing import Any

from flask import current_app, flash, jsonify, render_template, request, url_for
from flask_login import current_user

from broadside.campaigns.content.bodies import body_of
from broadside.core import roles
from broadside.core.errors import DomainError, ValidationError
from broadside.core.i18n import _
from broadside.core.models import Broadcast
from broadside.mail import media as library
from broadside.mail.design import current_design
from broadside.mail.media_images import MAX_UPLOAD_BYTES, megabytes
from broadside.mail.rendering import body_to_safe_html
from webapp.extensions import db
from webapp.forms import after_post
from webapp.media import bp
from webapp.media.files import here_url, media_json
from webapp.params import int_arg
from webapp.permissions import allow

PAGE = 48
MAX_QUERY = 200
TOO_LARGE = (f"This file is larger than {megabytes(MAX_UPLOAD_BYTES)}: an image can be at most "
             f"{MAX_UPLOAD_BYTES // (1024 * 1024)} MB. Save it smaller and upload it again.")


def too_large() -> str:
    """TOO_LARGE in the request's language (the API's: English)."""
    return _("This file is larger than %(size)s: an image can be at most %(mb)s MB. Save it "
             "smaller and upload it again.", size=megabytes(MAX_UPLOAD_BYTES),
             mb=MAX_UPLOAD_BYTES // (1024 * 1024))


def _query() -> str:
    return (request.args.get("q") or "").strip()[:MAX_QUERY]


def wants_json() -> bool:
    return request.accept_mimetypes.best == "application/json"


def design_width() -> int:
    return current_design(db.session).width


def _served_over_https() -> bool:
    """Emails load images over https only: the sanitiser drops any other image address."""
    base = current_app.config.get("MEDIA_URL") or current_app.config["BASE_URL"]
    return str(base).lower().startswith("https://")


def upload_request_too_large() -> bool:
    """More than one image and its form could be: refused before the body is read."""
    return bool(request.content_length and request.content_length > MAX_UPLOAD_BYTES + 64 * 1024)


@bp.route("/")
def index():
    query = _query()
    before = int_arg("before", None, minimum=1)
    images, following = library.page(db.session, query=query, before=before, limit=PAGE)
    used = library.usages(db.session, [m.sha256 for m in images])
    return render_template("media/index.html", images=images, used=used, query=query,
                           following=following, first_page=before is None,
                           design_width=design_width(), max_mb=MAX_UPLOAD_BYTES // (1024 * 1024),
                           not_https=not _served_over_https())


@bp.route("/", methods=["POST"])
def upload():
    alt = request.form.get("alt", "")
    try:
        if upload_request_too_large():
            raise ValidationError(too_large(), field="file")
        sent = request.files.get("file")
        if sent is None or not sent.filename and not sent.content_length:
            raise ValidationError(_("Choose an image file to upload."), field="file")
        data = sent.stream.read(MAX_UPLOAD_BYTES + 1)
        done = library.upload(db.session, data, filename=sent.filename, alt=alt,
                              design_width=design_width(), uploaded_by=current_user.id)
    except DomainError as exc:
        db.session.rollback()
        if wants_json():
            return jsonify(error=exc.message, field=exc.field), exc.status_code
        flash(_("Not uploaded: %(reason)s", reason=exc.message), "error")
        return after_post(url_for(".index"))
    if wants_json():
        return jsonify({**media_json(done.media), "src": here_url(done.media),
                        "created": done.created}), 201 if done.created else 200
    name = done.media.original_name or _("the image")
    flash(_("Uploaded “%(name)s”.", name=name) if done.created else
          _("“%(name)s” was in the library already: it is the same image.", name=name), "success")
    if not done.media.alt:
        flash(_("It has no alt text yet: add a few words saying what it shows, for readers who "
                "cannot see it."), "warning")
    return after_post(url_for(".index"))


@bp.route("/library.json")
def library_json():
    before = int_arg("before", None, minimum=1)
    images, following = library.page(db.session, query=_query(), before=before, limit=PAGE)
    return jsonify(items=[{**media_json(m), "src": here_url(m)} for m in images],
                   next=following)


@bp.route("/<int:media_id>/alt", methods=["POST"])
def edit_alt(media_id: int):
    try:
        media = library.set_alt(db.session, media_id, request.form.get("alt", ""))
    except ValidationError as exc:
        db.session.rollback()
        flash(_("Not saved: %(reason)s", reason=exc.message), "error")
        return after_post(url_for(".index", _anchor=f"media-{media_id}"))
    flash(_("Alt text saved.") if media.alt else _("Alt text removed: the image has none now."),
          "success")
    return after_post(url_for(".index", _anchor=f"media-{media_id}"))


@bp.route("/<int:media_id>/delete")
@allow(roles.MANAGE)
def confirm_delete(media_id: int):
    media = library.get_media(db.session, media_id)
    return render_template("media/delete.html", media=media,
                           used=library.usages_of(db.session, media.sha256))


@bp.route("/<int:media_id>/delete", methods=["POST"])
@allow(roles.MANAGE)
def delete(media_id: int):
    media = library.get_media(db.session, media_id)
    name = media.original_name or _("The image")
    try:
        library.delete_media(db.session, media_id)
    except DomainError as exc:
        flash(exc.message, "error")
        return after_post(url_for(".confirm_delete", media_id=media_id))
    flash(_("%(name)s is deleted.", name=name), "success")
    return after_post(url_for(".index"))


# ---------------------------------------------------------------- for other pages

def images_without_alt(broadcast: Broadcast) -> list[dict[str, Any]]:
    """The images in the broadcast's body as it would be sent, that have no alt text: each
    `src`, and the library's image when it is one of ours (its name, a link to edit it)."""
    written = body_of(db.session, broadcast)
    sources = library.images_without_alt(body_to_safe_html(written.body, written.body_format))
    shown = []
    for src in sources:
        match = library.SHA256.search(src)
        media = library.find_by_sha(db.session, match.group(0)) if match else None
        shown.append({"src": src, "media": media})
    return shown


def usage_url(usage: library.Usage) -> str:
    if usage.kind == "broadcast":
        endpoint = "broadcasts.edit" if usage.state == "draft" else "broadcasts.show"
        return url_for(endpoint, broadcast_id=usage.id)
    if usage.kind == "automation":
        return url_for("automations.edit", automation_id=usage.id)
    return url_for("transactional.show", template_id=usage.id)


@bp.app_context_processor
def media_helpers() -> dict[str, Any]:
    return {"media_images_without_alt": images_without_alt, "media_usage_url": usage_url,
            "media_here_url": here_url}

