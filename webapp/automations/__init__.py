"""Automations pages: the list with live per-step counts, the editor (trigger, steps with the
broadcast editor's preview and test send), enable, disable and delete. Routes are in
`webapp/automations/views.py`, which `webapp.create_app` imports."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("automations", __name__, url_prefix="/automations")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
