"""The owner's brand on public pages and in emails: the logo file and the colour's stylesheet.

Public routes (no login, no cookie: emails and sign-up pages load them):
- GET /brand/logo/<hash>.<ext>: a stored logo (in the database: any web host serves it),
  named by its content hash, so its URL changes whenever the logo does and it can be cached
  for a year (`immutable`), with an ETag for revalidation. Old logos stay served: emails
  already sent still show theirs.
- GET /brand/theme/<rrggbb>.css?font=<key>: the colour and the font (Settings -> Design) as
  CSS variables for the public pages (our Content-Security-Policy allows no inline style). Both
  are in the URL, so it never goes stale either.

Templates call `site_brand()` (the logo, colour and name, read once per request; a GET
creates no settings row) and `signup_text(key, list)`, so every public page takes the brand
through `templates/_brand.html` without each view passing it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, g, request, url_for
from sqlalchemy.exc import SQLAlchemyError

from broadside.core.i18n import current_locale
from broadside.core.models import MailingList, SiteSettings
from broadside.mail import design
from broadside.mail.signup_texts import page_text, texts_for
from webapp.extensions import db
from webapp.security import public

bp = Blueprint("brand", __name__, url_prefix="/brand")

YEAR = 365 * 24 * 3600
_HEX = re.compile(r"[0-9a-f]{6}")


def logo_directory() -> Path:
    """Where logos were kept before revision 0039 (still read, to take them in)."""
    return Path(current_app.instance_path) / "brand"


@bp.route("/logo/<name>")
@public("the owner's logo by content hash, loaded by emails and the public pages; a file, no cookie")
def logo(name: str) -> Response:
    # From the database, so every web host serves it; a logo from before revision 0039 is
    # taken in from this host's instance folder the first time it is asked for.
    data = design.logo_bytes(db.session, name, legacy=logo_directory())
    if data is None:
        abort(404)
    response = Response(data, mimetype=design.LOGO_TYPES[name.rsplit(".", 1)[1]])
    response.set_etag(name.split(".")[0])
    response.cache_control.public = True
    response.cache_control.max_age = YEAR
    response.cache_control.immutable = True
    return response.make_conditional(request)


@bp.route("/theme/<colour>.css")
@public("the brand colour's stylesheet, named by the colour; loaded by the public pages, no cookie")
def theme(colour: str) -> Response:
    if not _HEX.fullmatch(colour):
        abort(404)
    font = request.args.get("font")
    if font is not None and font not in design.FONTS:
        abort(404)
    brand = f"#{colour}"
    accent = design.readable_on_white(brand)
    # The font stack is the email's (app.css sets the body's font from --font).
    font_rule = f" --font: {design.FONTS[font][1]};" if font else ""
    css = (f":root {{ --brand: {brand}; --brand-ink: {design.text_on(brand)}; "
           f"--accent: {accent}; --accent-ink: {design.text_on(accent)};{font_rule} }}\n")
    response = Response(css, mimetype="text/css")
    response.cache_control.public = True
    response.cache_control.max_age = YEAR
    response.cache_control.immutable = True
    return response


def _settings() -> SiteSettings | None:
    if "site_settings_row" not in g:
        try:
            g.site_settings_row = db.session.get(SiteSettings, 1)
        except SQLAlchemyError:  # a page about an outage still renders
            db.session.rollback()
            g.site_settings_row = None
    return g.site_settings_row


def site_brand() -> dict[str, Any]:
    """What `_brand.html` shows: the logo (a URL on this host), its size, the stylesheet of the
    colour and font, and the sender's name (shown when there is no logo)."""
    settings = _settings()
    saved = design.saved_design(settings)
    name = (settings.sender_name if settings is not None else "") or ""
    logo_src = url_for("brand.logo", name=saved.logo_file) if saved.logo_file else ""
    shown = design.email_design(saved, from_name=name, logo_url=logo_src)
    return {"logo_src": shown.logo_url, "logo_alt": shown.logo_alt, "logo_width": shown.logo_width,
            "logo_height": shown.logo_height, "name": name, "colour": saved.colour,
            "theme_url": url_for("brand.theme", colour=saved.colour.lstrip("#"), font=saved.font)}


def signup_text(key: str, mailing_list: MailingList) -> list[str]:
    """The owner's text (or the default) for a sign-up page, as paragraphs, in the page's
    language (`texts_for`: its version, else the default language's, else Broadside's own)."""
    return page_text(texts_for(_settings(), current_locale()), key, mailing_list)


@bp.app_context_processor
def brand_helpers() -> dict[str, Any]:
    return {"site_brand": site_brand, "signup_text": signup_text}
