"""`GET /metrics`: Prometheus text format (the figures come from `webapp.metrics.collector`).

Access: with METRICS_TOKEN set, `Authorization: Bearer <METRICS_TOKEN>`; without it, only
clients on this machine (a loopback peer that forwards for someone else does not count).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, current_app, request
from prometheus_client import CONTENT_TYPE_LATEST

from webapp.extensions import db, get_redis
from webapp.metrics.collector import render_metrics
from webapp.proxies import forwarded_by
from webapp.security import public

bp = Blueprint("metrics", __name__)
LOOPBACK = ("127.0.0.1", "::1")


def metrics_refusal(config: Mapping[str, Any], remote_addr: str | None,
                    headers: Mapping[str, str], proxied: bool = False) -> tuple[int, str] | None:
    """None when this client may read the metrics; else the status and a one-line reason."""
    token = config.get("METRICS_TOKEN") or ""
    if token:
        given = headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
            return None
        return 401, "metrics need Authorization: Bearer <METRICS_TOKEN>\n"
    # A proxy on this machine forwards other people's requests from 127.0.0.1; unless it is a
    # trusted proxy (`proxied`: then remote_addr is already the real client, webapp/proxies.py),
    # they are not local.
    forwarded = headers.get("X-Forwarded-For") or headers.get("Forwarded")
    if remote_addr in LOOPBACK and not (forwarded and not proxied):
        return None
    return 403, "metrics are served to this machine only; set METRICS_TOKEN to read them remotely\n"


@bp.route("/metrics")
@public("it authenticates on its own: a bearer token, or loopback only")
def metrics() -> Response:
    refusal = metrics_refusal(current_app.config, request.remote_addr, request.headers,
                              proxied=forwarded_by(request.environ) is not None)
    if refusal is not None:
        status, message = refusal
        response = Response(message, status=status, content_type="text/plain; charset=utf-8")
        if status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body = render_metrics(db.session, get_redis(), current_app.config)
    return Response(body, content_type=CONTENT_TYPE_LATEST)
