"""The API's description: `/api/openapi.json` (OpenAPI 3.1) and the readable reference page
linked from Settings. Routes are in `webapp/apidocs/views.py`,
which `webapp.create_app` imports."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("apidocs", __name__)
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
