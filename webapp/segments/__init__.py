"""Segments pages: the list, the rule builder (HTMX, with a plain form underneath), delete and
duplicate. Routes are in `webapp/segments/views.py`,
which `webapp.create_app` imports."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("segments", __name__, url_prefix="/segments")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
