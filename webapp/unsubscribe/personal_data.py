"""The subscriber's own data, from the preferences page: the link in every email, no login,
no cookie, no script. The signed token is the only credential, as for the other preferences
actions (`webapp/unsubscribe/views.py`), so these POSTs are CSRF-exempt.

- POST /u/<token>/data    "Download my data": a JSON file (an attachment) of everything held
                          about the person (`broadside.audience.subscribers.personal_data`). A POST, so
                          a mail scanner or link previewer that follows every link of an email
                          never builds it; a GET answers 405 and builds nothing. At most
                          `EXPORT_LIMIT` a minute per person.
- GET  /u/<token>/erase   "Erase me": what erasing means, and the button. Changes nothing.
- POST /u/<token>/erase   erases them (the owner's erase) and answers the "erased" page
                          itself; a repeat (double click, reload) answers the same page.

Afterwards every page of their links answers "this address is no longer on our lists"
(`unsubscribe/erased.html`, through the blueprint's error handler), not a broken-link error.
"""

from __future__ import annotations

import json
from contextlib import suppress

from flask import current_app, make_response

from broadside.audience.subscribers import personal_data
from broadside.audience.unsubscribe import service
from broadside.core.errors import NotFound
from broadside.core.i18n import _
from broadside.core.timeutil import utcnow
from webapp.extensions import csrf, db
from webapp.security import public
from webapp.unsubscribe.claims import (
    TooManyRequests,
    bp,
    claim_of,
    page,
    reader_of,
    within_limit,
)

EXPORT_LIMIT = 6  # per person and minute: a file is built from up to 10,000 messages


@bp.post("/u/<token>/data")
@public("a subscriber's own data: the signed token is the credential; a POST so link scanners "
        "never trigger it")
def download_data(token: str):
    claim = claim_of(token)
    with suppress(NotFound):  # the file says what is held, whatever the link's list
        reader_of(claim)
    limit = int(current_app.config.get("PERSONAL_DATA_EXPORT_LIMIT", EXPORT_LIMIT))
    if not within_limit(f"unsubscribe:export:{claim.subscriber_id}", limit):
        raise TooManyRequests(_("You asked for your data %(count)s times in a minute. "
                                "Wait a minute, then try again.", count=limit))
    document = personal_data.personal_data(db.session, claim)
    body = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    response = make_response(body, 200)
    response.mimetype = "application/json"
    response.headers["Content-Disposition"] = (
        f'attachment; filename="my-data-{utcnow():%Y-%m-%d}.json"')
    # Their address and history: never cached, never indexed, as the pages of the link.
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Robots-Tag"] = "noindex, nofollow"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.get("/u/<token>/erase")
@public("the subscriber's own erase question: the signed token is the credential; it changes nothing")
def confirm_erase(token: str):
    recipient = reader_of(claim_of(token))
    return page("unsubscribe/erase.html", recipient=recipient, token=token)


@bp.post("/u/<token>/erase")
@public("a subscriber erasing themselves: the signed token is the credential, reached from a "
        "confirmation page")
def erase(token: str):
    claim = claim_of(token)
    with suppress(NotFound):  # the last page in their language, when the link still leads
        reader_of(claim)
    try:
        email = personal_data.erase_self(db.session, claim)
    except service.AddressGone:
        db.session.rollback()
        email = None  # erased already: the same page, without the address it no longer knows
    return page("unsubscribe/erased.html", email=email, message=_(service.ADDRESS_GONE))


# The token is the credential, as for the preferences page's other buttons.
for _view in (download_data, erase):
    csrf.exempt(_view)
