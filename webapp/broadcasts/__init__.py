"""The broadcasts pages. `views` has the list and the editor, `preview_views` the editor's
preview pane (its views, "Preview as", the email's own document), `sending_views` the send,
progress, steering and evidence routes; each adds its routes to this blueprint."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("broadcasts", __name__, url_prefix="/broadcasts")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
