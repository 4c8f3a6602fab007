"""Outgoing webhook endpoints over the API (described in `webapp/apidocs/webhooks.py`, held by
tests/webapp/test_api_webhooks.py).

- GET /api/webhooks -> 200 [Endpoint], oldest first; never a secret
- POST /api/webhooks {"url", "events": [...]} -> 201 Endpoint with its `secret`, shown this
  once (Settings -> Webhooks shows it again to the signed-in owner)
- DELETE /api/webhooks/<id> -> 204 (its delivery log goes with it), 404 if there is none

A refused body (an unknown field, a URL that is not http(s) or reaches a private address
without WEBHOOKS_ALLOW_PRIVATE=1, an unknown or missing event) is 422 with the reason. Write
routes need a full token (a read-only one gets 403, like every write).

A read-only token sees each URL masked to its origin (`https://host:port/•••`): a receiver's
path or query is often its only credential (Zapier's, Slack's and most no-code hooks are
"whoever knows the URL"), and a read-only token is the kind handed to dashboards. The URL is
masked in `disabled_reason` too, which quotes the receiver's last answer (a framework's 404
page names the path it was asked for).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import current_app, g, jsonify

from broadside.webhooks import endpoints
from webapp.api import bp, json_body
from webapp.extensions import db

MASK = "•••"


def masked_url(url: str) -> str:
    """The URL's scheme, host and port, its path and query replaced by MASK."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # never saved so (endpoints are checked), but nothing of it then
        return MASK
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}/{MASK}"


def _masked(output: dict[str, Any]) -> dict[str, Any]:
    """An endpoint as a read-only token sees it: no path or query, in the URL or in the
    reason it was disabled."""
    url = output["url"]
    masked = masked_url(url)
    reason = output.get("disabled_reason")
    if reason:
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        shown = {url: masked, path: f"/{MASK}", parts.path: f"/{MASK}", parts.query: MASK}
        # Longest first, so the whole URL goes before the path inside it.
        for secret in sorted(shown, key=len, reverse=True):
            if len(secret) > 1:
                reason = reason.replace(secret, shown[secret])
    return {**output, "url": masked, "disabled_reason": reason}


@bp.route("/webhooks", methods=["GET"])
def api_webhooks():
    listed = [endpoints.as_output(e) for e in endpoints.all_endpoints(db.session)]
    if g.api_token.read_only:
        listed = [_masked(output) for output in listed]
    return jsonify(listed)


@bp.route("/webhooks", methods=["POST"])
def api_create_webhook():
    url, events = endpoints.parse_input(json_body())
    endpoint = endpoints.create(db.session, url, events,
                                allow_private=bool(current_app.config.get("WEBHOOKS_ALLOW_PRIVATE")))
    return jsonify(endpoints.as_output(endpoint, with_secret=True)), 201


@bp.route("/webhooks/<int:endpoint_id>", methods=["DELETE"])
def api_delete_webhook(endpoint_id: int):
    endpoints.remove(db.session, endpoint_id)
    return "", 204
