"""The broadcasts pages. `views` has the list and the editor, `sending_views` the send,
progress, steering and evidence routes; both add their routes to this blueprint."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("broadcasts", __name__, url_prefix="/broadcasts")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
