"""`GET /favicon.ico`: Broadside's icon where browsers and feed readers look for it by default.

Every page names its icon with a link (static/favicon.svg, and this file for browsers without
SVG icons); a page without one (an email opened in the browser, a JSON answer) still gets
the icon rather than the 404 page. Like the static files it reads no session and sets no
cookie, so a subscriber's public page stays cookie-free. static/favicon.ico is
static/favicon.svg drawn at 16, 32 and 48 pixels (PNG images in an ICO file).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from flask import Blueprint, Response, current_app, request

from webapp.security import public

bp = Blueprint("favicon", __name__)

DAY = 24 * 3600


@bp.route("/favicon.ico")
@public("Broadside's icon where browsers look for one: a file, no session read, no cookie")
def icon() -> Response:
    # Read whole (under 2 KB): no file handle outlives the request.
    data = (Path(current_app.static_folder or "") / "favicon.ico").read_bytes()
    response = Response(data, mimetype="image/vnd.microsoft.icon")
    response.set_etag(hashlib.sha256(data).hexdigest()[:32])
    response.cache_control.public = True
    response.cache_control.max_age = DAY
    return response.make_conditional(request)
