"""A broadcast's preview, as each kind of client shows it: the pane's views (desktop, a phone,
Apple Mail and Gmail in dark mode, the plain-text part), "Preview as" any subscriber, and the
email itself for the pane's sandboxed iframe.

The view and the person travel in the query string (`view`, `as`), so the tabs are links that
work without JavaScript; with it, htmx swaps the pane alone. The editor's autosave carries them
too (hidden inputs of the pane that belong to the compose form), so typing keeps the view.
"""

from __future__ import annotations

from flask import Response, abort, current_app, render_template, request
from flask_login import current_user

from broadside.audience.subscribers.search import Filters, search
from broadside.campaigns.broadcasts import drafts, merge_person
from broadside.campaigns.content.bodies import WrittenSource, body_of
from broadside.core.errors import ValidationError
from broadside.core.site_settings import get_settings
from broadside.mail.dark_mode import as_apple_mail_dark, as_gmail_dark
from broadside.mail.text_part import automatic_text
from webapp.broadcasts import bp
from webapp.extensions import db
from webapp.htmx import make_response

# The pane's views: (value, label). "text" is the plain-text part, shown as text.
VIEWS = (("desktop", "Desktop"), ("phone", "Phone"), ("apple-dark", "Apple Mail dark"),
         ("gmail-dark", "Gmail dark"), ("text", "Plain text"))
VIEW_NAMES = {value for value, _ in VIEWS}
# The document for the iframe of each view that has one (the phone's is the desktop's HTML in
# a 375 px frame: the email's own media queries do the rest).
TRANSFORMS = {"apple-dark": as_apple_mail_dark, "gmail-dark": as_gmail_dark}
# The preview document is the email itself: inline styles and images, nothing else. Images
# from this host too: the owner's logo is served here, over plain http on a LAN install.
PREVIEW_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' https: data:; "
               "base-uri 'none'; form-action 'none'; frame-ancestors 'self'")


def chosen_view(value: str | None) -> str:
    return value if value in VIEW_NAMES else VIEWS[0][0]


def preview_for(broadcast_id: int, *, check_fields: bool = False, picked: str | None = None
                ) -> tuple[drafts.DraftPreview, str | None]:
    """The preview with the picked person's details (None: the sample reader Alex), and a
    refusal to say when nobody has the picked address (then Alex fills it in)."""
    person, problem = _person(picked)
    return drafts.preview_email(db.session, broadcast_id, sample_email=current_user.email,
                                default_from=current_app.config["MAIL_FROM"],
                                check_fields=check_fields, person=person), problem


def _person(picked: str | None) -> tuple[merge_person.MergePerson | None, str | None]:
    if not (picked or "").strip():
        return None, None
    try:
        return merge_person.chosen(db.session, picked, list_id=None, segment_id=None), None
    except ValidationError as exc:
        return None, exc.message


def pane_context(view: str | None, picked: str | None, problem: str | None = None) -> dict:
    """What templates/broadcasts/_preview.html needs beyond the preview itself."""
    return {"views": VIEWS, "view": chosen_view(view), "picked": (picked or "").strip()[:320],
            "as_problem": problem, "settings": get_settings(db.session)}


def automatic_text_of(source: WrittenSource) -> str:
    """The plain-text part made from a broadcast's, a step's or a template's body as it is
    now (the text fields show it, and "Write my own" starts from it)."""
    written = body_of(db.session, source)
    return automatic_text(written.body, written.body_format)


@bp.app_context_processor
def text_part_helpers() -> dict:
    return {"automatic_text": automatic_text_of, "automatic_body_text": automatic_text}


@bp.route("/<int:broadcast_id>/preview-pane")
def preview_pane(broadcast_id: int):
    """htmx: the preview pane in another view or for another person."""
    view, picked = request.args.get("view"), request.args.get("as")
    preview, problem = preview_for(broadcast_id, check_fields=True, picked=picked)
    return render_template("broadcasts/_preview.html", preview=preview,
                           broadcast=preview.broadcast, **pane_context(view, picked, problem))


@bp.route("/<int:broadcast_id>/preview-people")
def preview_people(broadcast_id: int):
    """htmx: the subscribers whose address starts with what was typed (a few, newest first),
    as the "Preview as" field's suggestions."""
    drafts.get_broadcast(db.session, broadcast_id)  # 404 for no such broadcast
    typed = (request.args.get("as") or "").strip()
    people = (search(db.session, Filters.parse(q=typed, match="prefix"),
                     page_size=merge_person.SUGGESTIONS).rows if len(typed) >= 2 else [])
    return render_template("broadcasts/_preview_people.html", people=people)


@bp.route("/<int:broadcast_id>/preview")
def preview_frame(broadcast_id: int) -> Response:
    """The email (for the sample recipient, or the person picked), as a document of its own
    for the iframe, as the chosen view's client shows it."""
    view = chosen_view(request.args.get("view"))
    if view == "text":
        abort(404)
    preview, _problem = preview_for(broadcast_id, picked=request.args.get("as"))
    if preview.rendered is not None:
        html = preview.rendered.html
        response = make_response(TRANSFORMS[view](html) if view in TRANSFORMS else html)
    else:
        response = make_response(render_template("broadcasts/preview_problem.html",
                                                  problem=preview.problem))
    response.headers["Content-Security-Policy"] = PREVIEW_CSP
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Cache-Control"] = "no-store"
    return response
