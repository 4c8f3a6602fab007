"""The public image files and the URLs that name them.

GET /media/<sha256>.<ext> and /media/<sha256>@2x.<ext>: public (email clients fetch them with
no cookie), named by the uploaded file's content hash, so the bytes behind a URL never change:
cached a year, `immutable`, with an ETag for revalidation; 404 for any other name.
"""

from __future__ import annotations

from typing import Any

from flask import Response, abort, current_app, request, url_for

from broadside.core.models import Media
from broadside.mail import media as library
from webapp.extensions import db
from webapp.media import bp
from webapp.permissions import public

YEAR = 365 * 24 * 3600


@bp.route("/<name>")
@public("an image of the media library by content hash: email clients load it without signing "
        "in; a file, no cookie")
def file(name: str) -> Response:
    stored = library.public_file(db.session, name)
    if stored is None:
        abort(404)
    response = Response(stored.data, mimetype=stored.content_type)
    response.set_etag(stored.etag)
    response.cache_control.public = True
    response.cache_control.max_age = YEAR
    response.cache_control.immutable = True
    return response.make_conditional(request)


def absolute_url(media: Media, variant: str = "1x") -> str:
    """The URL an email uses: MEDIA_URL's when set, else this app's public base URL."""
    return library.url_of(media, base_url=current_app.config["BASE_URL"],
                          media_url=current_app.config.get("MEDIA_URL", ""), variant=variant)


def here_url(media: Media, variant: str = "1x") -> str:
    """The URL on this host, for the owner's own pages (whatever BASE_URL says)."""
    return url_for("media.file", name=library.public_name(media, variant))


def media_json(media: Media) -> dict[str, Any]:
    """An image as the API and the picker give it."""
    return {"id": media.id, "url": absolute_url(media),
            "url_2x": absolute_url(media, "2x") if media.has_2x else None,
            "width": media.width, "height": media.height, "alt": media.alt,
            "name": media.original_name, "content_type": media.content_type,
            "bytes": media.bytes_1x, "animated": media.animated,
            "created_at": media.created_at.isoformat() + "Z"}
