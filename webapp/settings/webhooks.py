"""Settings -> Webhooks: endpoints Broadside POSTs its events to, signed with their own secret.

- GET  /settings/webhooks                       the endpoints, their state, the form to add one
- POST /settings/webhooks                       add one: 303 to its page, which shows its
                                                secret once (a reload does not add it again);
                                                422 with the typed URL and ticked events kept,
                                                the refusal under the input it is about
- GET  /settings/webhooks/<id>                  one endpoint: what it wants and its delivery log
- POST /settings/webhooks/<id>/test             queue a `webhook.test` event for it
- POST /settings/webhooks/<id>/secret           show its secret again (a POST: never in a URL,
                                                a history entry or a cache)
- POST /settings/webhooks/<id>/enable           turn a disabled endpoint back on
- POST /settings/webhooks/<id>/delete           delete it and its log

What is recorded and how it is delivered: `broadside/webhooks/` and `jobs/webhooks_out.py`
(README, "Outgoing webhooks").
"""

from __future__ import annotations

from flask import current_app, flash, redirect, render_template, request, url_for

from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.webhooks import DESCRIPTIONS, EVENT_TYPES, endpoints, ledger
from broadside.webhooks.endpoints import decode_events
from webapp.extensions import db
from webapp.forms import after_post, keep_for_one_read, read_once
from webapp.settings.views import bp

# The session's note that an endpoint was just added (its id, never its secret): its page
# shows the secret on that first read only.
_JUST_CREATED = "webhook_created"


def _allow_private() -> bool:
    return bool(current_app.config.get("WEBHOOKS_ALLOW_PRIVATE"))


def _index(*, url: str = "", events: list[str] | None = None,
           error: ValidationError | None = None, status: int = 200):
    rows = [(e, ledger.counts(db.session, e.id)) for e in endpoints.all_endpoints(db.session)]
    return render_template(
        "settings/webhooks.html", rows=rows, event_types=EVENT_TYPES, descriptions=DESCRIPTIONS,
        typed_url=url, typed_events=events if events is not None else [],
        error=error.message if error else None, error_field=error.field if error else None,
        decode_events=decode_events, allow_private=_allow_private(),
    ), status


def _endpoint_page(endpoint_id: int, *, secret: str | None = None, created: bool = False,
                   status: int = 200):
    endpoint = endpoints.get(db.session, endpoint_id)
    return render_template(
        "settings/webhooks_endpoint.html", endpoint=endpoint,
        events=decode_events(endpoint.events), log=ledger.log(db.session, endpoint_id),
        counts=ledger.counts(db.session, endpoint_id), secret=secret, created=created,
    ), status


@bp.route("/webhooks", methods=["GET"])
def webhooks_page():
    return _index()


@bp.route("/webhooks", methods=["POST"])
def create_webhook():
    url = request.form.get("url", "")[:4000]
    events = request.form.getlist("events")
    try:
        endpoint = endpoints.create(db.session, url, events, allow_private=_allow_private())
    except ValidationError as exc:
        db.session.rollback()
        return _index(url=url, events=events, error=exc, status=422)
    # The secret stays in the database (Reveal shows it again); the session says only
    # "just added", so the page after this redirect shows it once.
    keep_for_one_read(_JUST_CREATED, str(endpoint.id))
    return after_post(url_for("settings.webhook_page", endpoint_id=endpoint.id) + "#secret")



@bp.route("/webhooks/<int:endpoint_id>", methods=["GET"])
def webhook_page(endpoint_id: int):
    if read_once(_JUST_CREATED) == str(endpoint_id):
        return _endpoint_page(endpoint_id, secret=endpoints.get(db.session, endpoint_id).secret,
                              created=True)
    return _endpoint_page(endpoint_id)


@bp.route("/webhooks/<int:endpoint_id>/test", methods=["POST"])
def webhook_test(endpoint_id: int):
    event_id = endpoints.send_test(db.session, endpoint_id)
    flash(_("Test event %(event)s queued: the worker sends it within seconds. "
            "Reload to see it in the log.", event=event_id), "success")
    return redirect(url_for("settings.webhook_page", endpoint_id=endpoint_id))


@bp.route("/webhooks/<int:endpoint_id>/secret", methods=["POST"])
def webhook_secret(endpoint_id: int):
    endpoint = endpoints.get(db.session, endpoint_id)
    return _endpoint_page(endpoint_id, secret=endpoint.secret)


@bp.route("/webhooks/<int:endpoint_id>/enable", methods=["POST"])
def webhook_enable(endpoint_id: int):
    if endpoints.enable(db.session, endpoint_id):
        flash(_("Enabled: its waiting events go out again."), "success")
    return redirect(url_for("settings.webhook_page", endpoint_id=endpoint_id))


@bp.route("/webhooks/<int:endpoint_id>/delete", methods=["POST"])
def webhook_delete(endpoint_id: int):
    endpoints.remove(db.session, endpoint_id)
    flash(_("The endpoint and its delivery log are deleted."), "success")
    return redirect(url_for("settings.webhooks_page"))
