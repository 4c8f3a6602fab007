"""The API's description: `/api/openapi.json` (OpenAPI 3.1) and the readable reference page
linked from Settings. Routes are in `webapp/apidocs/views.py`."""

from flask import Blueprint

bp = Blueprint("apidocs", __name__)

from webapp.apidocs import views  # noqa: E402,F401 - routes register on `bp`
