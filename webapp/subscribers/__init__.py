"""Subscribers: the table and the subscriber page (`views.py`), the bulk actions
(`bulk_views.py`), CSV import and export (`transfer_views.py`); each adds its routes to this
blueprint, and `webapp.create_app` imports all three."""

from flask import Blueprint

bp = Blueprint("subscribers", __name__, url_prefix="/subscribers")
