"""Subscribers: the table and the subscriber page (`views.py`), the bulk actions
(`bulk_views.py`), CSV import and export (`transfer_views.py`); each adds its routes to this
blueprint, and `webapp.create_app` imports all three."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("subscribers", __name__, url_prefix="/subscribers")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
