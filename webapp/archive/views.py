"""The public archive, its Atom feed, the view-in-browser page, and the owner's switches.

Public (no login, no cookie, nothing written):
- GET /archive/<list>/ : the published issues, newest first, with the sign-up form's link;
- GET /archive/<list>/<broadcast>-<slug> : one issue (another slug redirects to its own);
- GET /archive/<list>/feed.atom : the 20 newest issues, full text;
  all three 404 alike when the archive is off or the issue is not published, and carry an
  ETag (a digest of the body) and Last-Modified with 304 on a conditional GET, public for
  a few minutes;
- GET /view/<token> : the copy a view-in-browser link was made for (that reader's own),
  an email document: its own CSP (inline style, no script), never cached, no referrer.
Owner: POSTs for the list's archive switch, publishing a broadcast and its link choice.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime

from babel import Locale, UnknownLocaleError
from flask import (
    Blueprint,
    Response,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user

from broadside.campaigns.archive import service
from broadside.campaigns.broadcasts.service import get_broadcast
from broadside.campaigns.content.versions import version_for
from broadside.core import roles
from broadside.core.errors import DomainError, NotFound
from broadside.core.i18n import _, clean_locale, current_locale, direction, shipped
from broadside.core.models import MailingList
from webapp.extensions import db
from webapp.i18n import use_locale
from webapp.permissions import allow, can
from webapp.security import forbidden, public
from webapp.settings.brand import site_brand
from webapp.signup.language import page_language
from webapp.templating import owner_zone

bp = Blueprint("archive", __name__)

MAX_AGE = 300  # seconds a browser or proxy may keep a public page without asking
# An email document: inline style (the nature of email), images, no script, no form, no frame.
VIEW_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' https: data:; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


@bp.app_template_filter("iso_date")
def iso_date(moment: datetime) -> str:
    return moment.date().isoformat()


@bp.app_template_filter("atom_time")
def atom_time(moment: datetime) -> str:
    """A stored (naive UTC) time as RFC 3339."""
    return moment.replace(microsecond=0).isoformat() + "Z"


# Characters XML 1.0 forbids even escaped (C0 controls but tab and line breaks, lone
# surrogates, U+FFFE/U+FFFF): a Markdown body may hold them, a feed reader would refuse the feed.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@bp.app_template_filter("xml_text")
def xml_text(text: str) -> str:
    return _NOT_XML.sub("", text)


def _base_url() -> str:
    return str(current_app.config["BASE_URL"]).rstrip("/")


# Rendered public pages, per app and process, by everything they depend on
# (service.ArchiveVersion, the brand, the time zone, the page): rendered once per change, not
# once per visitor. Bounded by their total size (an issue may be up to a megabyte).
MAX_CACHED_CHARS = 8_000_000
_pages_lock = threading.Lock()


class _Pages(OrderedDict[tuple, str]):
    chars = 0


def _page(key: tuple, render: Callable[[], str]) -> str:
    pages: _Pages = current_app.extensions.setdefault("archive_pages", _Pages())
    with _pages_lock:
        body = pages.get(key)
        if body is not None:
            pages.move_to_end(key)
            return body
    body = render()
    with _pages_lock:
        if key not in pages and len(body) <= MAX_CACHED_CHARS // 8:
            pages[key] = body
            pages.chars += len(body)
            while pages.chars > MAX_CACHED_CHARS:
                _, dropped = pages.popitem(last=False)
                pages.chars -= len(dropped)
    return body


def _public(page: str, list_id: int, render: Callable[[MailingList], str], mimetype: str,
            *extra: object) -> Response:
    """A public archive page: 404 unless the archive is on; an ETag (a digest of the body)
    and Last-Modified, 304 on a conditional GET; cacheable by anyone for a few minutes."""
    mailing_list = service.open_archive(db.session, list_id)
    version = service.archive_version(db.session, mailing_list)
    brand = tuple(sorted(site_brand().items()))
    key = (page, *extra, current_locale(), version.key, brand, str(owner_zone()),
           request.script_root)
    body = _page(key, lambda: render(mailing_list))
    response = Response(body, mimetype=mimetype)
    response.set_etag(hashlib.sha256(body.encode()).hexdigest()[:32])
    response.last_modified = version.last_modified
    response.cache_control.public = True
    response.cache_control.max_age = MAX_AGE
    response.vary.add("Accept-Language")  # the chrome's language may follow the browser's
    return response.make_conditional(request)


@bp.route("/archive/<int:list_id>/")
@public("a list's public archive: only when its owner turned it on, only published issues; GET only")
def index(list_id: int) -> Response:
    page_language(service.open_archive(db.session, list_id))
    return _public("index", list_id, lambda mailing_list: render_template(
        "archive/index.html", list=mailing_list, issues=service.issues(db.session, list_id)),
        "text/html")


@bp.route("/archive/<int:list_id>/<int:broadcast_id>-<slug>")
@public("one published issue, a copy rendered with nobody's data; the same 404 for off, "
        "unpublished and missing")
def issue(list_id: int, broadcast_id: int, slug: str) -> Response:
    found = service.issue(db.session, list_id, broadcast_id)
    lang = request.args.get("lang")
    if slug != found.slug:
        return redirect(url_for(".issue", list_id=list_id, broadcast_id=broadcast_id,
                                slug=found.slug, lang=lang), 301)  # type: ignore[return-value]
    versions = service.issue_versions(db.session, found)
    shown = _version_asked(versions, lang)
    # The page's words in the version's language when Broadside speaks it (so one address is
    # one page), else by the public pages' rule.
    if shipped(shown.locale):
        use_locale(shown.locale)
    else:
        page_language(db.session.get(MailingList, list_id))
    base = _base_url() + url_for(".issue", list_id=list_id, broadcast_id=broadcast_id,
                                 slug=found.slug)
    alternates = [(v.locale, base if v.default else f"{base}?lang={v.locale}",
                   _language_name(v.locale)) for v in versions] if len(versions) > 1 else []
    return _public("issue", list_id, lambda mailing_list: render_template(
        "archive/issue.html", list=mailing_list, issue=found, copy=shown.copy,
        shown_locale=shown.locale, alternates=alternates, x_default=base,
        html_lang=shown.locale, html_dir=direction(shown.locale)),
        "text/html", broadcast_id, shown.locale)


def _version_asked(versions: list[service.IssueVersion], lang: str | None) -> service.IssueVersion:
    """The version `?lang=` names (its tag, else its language), else the default."""
    tags = [v.locale for v in versions]
    tag = version_for(clean_locale(lang), tags) if lang else None
    return versions[tags.index(tag)] if tag is not None else versions[0]


def _language_name(tag: str) -> str:
    """A language named in itself (Deutsch, العربية), for the switcher."""
    try:
        return Locale.parse(tag.replace("-", "_")).get_display_name(tag.replace("-", "_")) or tag
    except (ValueError, TypeError, UnknownLocaleError):
        return tag


@bp.route("/archive/<int:list_id>/feed.atom")
@public("the public archive's Atom feed: published issues only, when the archive is on")
def feed(list_id: int) -> Response:
    base = _base_url()
    host = base.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0] or "localhost"

    def render(mailing_list: MailingList) -> str:
        version = service.archive_version(db.session, mailing_list)
        return render_template("archive/feed.xml", list=mailing_list, base=base, host=host,
                               entries=service.feed_entries(db.session, list_id),
                               updated=version.last_modified)

    return _public("feed", list_id, render, "application/atom+xml", base)


@bp.route("/view/<token>")
@public("view in your browser: the signed token (one delivery, bound to its reader) is the credential")
def view(token: str) -> Response:
    try:
        rendered = service.reader_view(db.session, token, secret_key=current_app.config["SECRET_KEY"],
                                       base_url=current_app.config["BASE_URL"])
    except DomainError as exc:  # only read: nothing to roll back
        response = Response(render_template("archive/link_problem.html", message=exc.message),
                            status=exc.status_code)
    else:
        response = Response(rendered.html, mimetype="text/html")
        response.headers["Content-Security-Policy"] = VIEW_CSP
    response.headers["Cache-Control"] = "private, no-store"
    # The token must not travel to the sites the email links to.
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Robots-Tag"] = "noindex"
    return response


# ------------------------------------------------------------------ the owner's switches

@bp.route("/archive/lists/<int:list_id>", methods=["POST"])
@allow("manage")
def set_archive(list_id: int):
    enabled = request.form.get("enabled") == "1"
    mailing_list = service.set_archive(db.session, list_id, enabled)
    flash(_("The public archive of “%(list)s” is on.", list=mailing_list.name) if enabled else
          _("The public archive of “%(list)s” is off.", list=mailing_list.name), "success")
    return redirect(url_for("lists.show", list_id=list_id) + "#archive")


@bp.route("/archive/broadcasts/<int:broadcast_id>/publish", methods=["POST"])
@allow("send")
def publish(broadcast_id: int):
    wanted = request.form.get("published") == "1"
    try:
        state = service.publish(db.session, broadcast_id, wanted)
    except NotFound:
        raise
    except DomainError as exc:
        db.session.rollback()
        flash(exc.message, "error")
    else:
        if not state.published:
            flash(_("It is no longer in the public archive."), "success")
        elif state.archive_on:
            flash(_("Published in the public archive."), "success")
        else:
            flash(_("Published; it shows once the archive of “%(list)s” is turned on.",
                    list=state.list_name), "success")
    return redirect(url_for("broadcasts.show", broadcast_id=broadcast_id) + "#archive")


@bp.app_context_processor
def archive_helpers() -> dict[str, object]:
    """`broadcast_archive(id)` for the partials the broadcast pages include (as `site_brand`
    is for the public pages), so their own views need not know about the archive."""
    return {"broadcast_archive": lambda broadcast_id: service.broadcast_archive(db.session, broadcast_id)}


VIEW_CHOICES = {"default": None, "on": True, "off": False}
BACK_TO = {"show": "broadcasts.show", "send": "broadcasts.confirm_send"}


@bp.route("/archive/broadcasts/<int:broadcast_id>/view-link", methods=["POST"])
@allow("write")
def set_view_link(broadcast_id: int):
    choice = request.form.get("view_link", "")
    back = url_for(BACK_TO.get(request.form.get("back", ""), "broadcasts.show"),
                   broadcast_id=broadcast_id) + "#view-link"
    if choice not in VIEW_CHOICES:
        flash(_("Choose whether the email carries a “View in your browser” link."), "error")
        return redirect(back)
    if not can(roles.SEND) and get_broadcast(db.session, broadcast_id).status != "draft":
        # A draft's choice is its writer's; once it is on its way, changing what the copies
        # still to go carry is steering a send.
        return forbidden(roles.SEND, current_user.role)
    on = service.set_view_link(db.session, broadcast_id, VIEW_CHOICES[choice])
    flash(_("Each copy will carry a “View in your browser” link.") if on else
          _("The copies will not carry a “View in your browser” link."), "success")
    return redirect(back)
