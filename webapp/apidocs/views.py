"""Routes of the API's description (on `webapp.apidocs.bp`).

- GET /api/openapi.json: the OpenAPI 3.1 document (`document.DOCUMENT`), public: it is
  documentation, and says nothing a token would protect. It is not on the API blueprint, so
  the bearer check does not apply; errors under /api/ are still JSON (`webapp/errors.py`).
- GET /settings/api-reference: the same document as a readable page, for a signed-in owner
  (the default for every page: `webapp/security.py`), linked from Settings.
"""

from __future__ import annotations

from flask import jsonify, render_template

from webapp.apidocs import bp, reference
from webapp.apidocs.document import DOCUMENT
from webapp.security import public


@bp.route("/api/openapi.json")
@public("the API's description: routes and shapes, no data and no secret, read before a client holds a token")
def openapi():
    response = jsonify(DOCUMENT)
    # A client may fetch it at will; it changes only with a deploy.
    response.cache_control.public = True
    response.cache_control.max_age = 300
    return response


@bp.route("/settings/api-reference")
def api_reference():
    return render_template("apidocs/reference.html", info=reference.info(),
                           sections=reference.sections(), schemas=reference.schemas())
