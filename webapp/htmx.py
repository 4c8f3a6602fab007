"""htmx on the server side, through htmx-flask: import `request` and `make_response` from here.

`request.htmx` is true for a request made by htmx (its `HX-Request` header), with
`.boosted`, `.history_restore_request`, `.target`... for the other request headers; the
extension `htmx` is bound to the app in `create_app`. `make_response(..., trigger=,
reswap=, retarget=, redirect=, ...)` sets the HX-* response headers.
"""

from __future__ import annotations

from typing import Any

from flask import Response
from htmx_flask import Htmx, request
from htmx_flask import make_response as _htmx_make_response
from htmx_flask.constants import RESWAPS

__all__ = ["STOP_POLLING", "htmx", "make_response", "request", "vary_on_htmx"]

htmx = Htmx()

# The status that tells an htmx poll (`hx-trigger="every 2s"`) to stop asking.
STOP_POLLING = 286

# htmx-flask 0.1.0 lists the allowed swaps with a comma missing ("beforebegin" "afterbegin"
# is one string, "beforebeginafterbegin"), so it raises ValueError for reswap="beforebegin"
# and reswap="afterbegin", both valid in htmx. For those two the header is set here. The
# set is computed, so it empties itself once a fixed htmx-flask is installed.
_RESWAPS_MISSING_UPSTREAM = frozenset({"beforebegin", "afterbegin"} - set(RESWAPS))


def make_response(*args: Any, reswap: str | None = None, **hx_headers: Any) -> Response:
    """`htmx_flask.make_response`, which also accepts the two swaps it wrongly refuses."""
    if reswap in _RESWAPS_MISSING_UPSTREAM:
        response = _htmx_make_response(*args, **hx_headers)
        response.headers["HX-Reswap"] = reswap
        return response
    return _htmx_make_response(*args, reswap=reswap, **hx_headers)


def vary_on_htmx(response: Response) -> Response:
    """For URLs that answer a fragment to htmx and a whole page to everyone else: caches
    must keep the two apart."""
    response.headers["Vary"] = "HX-Request"
    return response
