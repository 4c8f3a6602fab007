"""Segments pages: the list, the rule builder (HTMX, with a plain form underneath), delete and
duplicate. Routes are in `webapp/segments/views.py`."""

from flask import Blueprint

bp = Blueprint("segments", __name__, url_prefix="/segments")

from webapp.segments import views  # noqa: E402,F401 - routes register on `bp`
