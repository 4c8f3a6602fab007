"""The public unsubscribe pages behind the link in every email: no login, no cookies, no JS.

- GET  /u/<token>               asks "Unsubscribe alice@example.com from Weekly Notes?"; changes
                                nothing (mail scanners and link previewers follow links).
- POST /u/<token>               the page's button, or a mail client's RFC 8058 one-click POST
                                (`List-Unsubscribe=One-Click`, no cookie, no CSRF token); answers
                                200 itself, never a redirect.
- POST /u/<token>/resubscribe   undo.
- GET/POST /u/<token>/preferences   every list this person is on: leave, rejoin, leave all.
- /u/<token>/data, /u/<token>/erase   their own data: download it, erase it
                                (`webapp/unsubscribe/personal_data.py`).

The blueprint, the token check and the uncached answer all these pages share are in
`webapp/unsubscribe/claims.py`; `webapp.create_app` imports both route modules.

Once the person a link was made for is erased, every one of these answers "this address is no
longer on our lists" (404) rather than the broken-link page.

The signed token is the only credential. These pages use their own layout, which never calls
`csrf_token()`, so no session cookie is ever set here.
"""

from __future__ import annotations

from flask import request

from broadside.audience.subscribers.time_zone import zone_groups
from broadside.audience.unsubscribe import service
from broadside.core.errors import ValidationError
from broadside.core.i18n import LOCALE_NAMES, _
from webapp.extensions import csrf, db
from webapp.security import public
from webapp.signup.language import page_language
from webapp.unsubscribe.claims import bp, claim_of, page, reader_of


@bp.get("/u/<token>")
@public("the unsubscribe link every email carries: the signed token is the credential")
def confirm(token: str):
    recipient = reader_of(claim_of(token))
    return page("unsubscribe/confirm.html", recipient=recipient, token=token)


@bp.post("/u/<token>")
@public("RFC 8058 one-click unsubscribe: a mail client's POST with no cookie; the signed token "
        "is the credential")
def one_click(token: str):
    claim = claim_of(token)
    reader_of(claim)  # the answer, a mail client's one-click included, in the reader's language
    one_click_body = request.form.get("List-Unsubscribe", "").strip().lower() == "one-click"
    change = service.unsubscribe(db.session, claim, "one-click" if one_click_body else "link")
    return page("unsubscribe/done.html", recipient=change.recipient, token=token)


@bp.post("/u/<token>/resubscribe")
@public("a subscriber rejoining from their link: the signed token is the credential")
def resubscribe(token: str):
    claim = claim_of(token)
    reader_of(claim)
    change = service.resubscribe(db.session, claim, "link")
    return page("unsubscribe/resubscribed.html", recipient=change.recipient, token=token)


def _list_id(raw: str | None) -> int | None:
    return int(raw) if raw and raw.isdigit() and len(raw) < 12 else None


@bp.route("/u/<token>/preferences", methods=["GET", "POST"])
@public("a subscriber's own preferences: the signed token is the credential; no cookie is set")
def preferences(token: str):
    claim = claim_of(token)
    recipient = reader_of(claim)
    message, status = None, 200
    action = request.form.get("action", "")
    if request.method == "POST":
        try:
            if action == "language":
                chosen = service.set_language(db.session, claim, request.form.get("locale"))
                page_language(recipient.list_language, chosen)  # this page already in it
                message = (_("Your pages and emails from us are now in %(language)s.",
                             language=LOCALE_NAMES[chosen]) if chosen else
                           _("Your pages and emails from us now follow the list's language."))
            elif action == "timezone":
                zone = service.set_timezone(db.session, claim, request.form.get("timezone"))
                message = (_("Your time zone is now %(zone)s.", zone=zone) if zone else
                           _("Your time zone is no longer set."))
            else:
                message = service.change_preference(
                    db.session, claim, action, _list_id(request.form.get("list_id")),
                )
        except ValidationError as exc:
            db.session.rollback()
            message, status = exc.message, 422
    prefs = service.preferences(db.session, claim)
    return page("unsubscribe/preferences.html", status, prefs=prefs, token=token,
                message=message, is_error=status != 200,
                zone_groups=zone_groups(prefs.recipient.timezone))


# The token is the credential; a mail client's one-click POST carries no CSRF token.
for _view in (one_click, resubscribe, preferences):
    csrf.exempt(_view)

