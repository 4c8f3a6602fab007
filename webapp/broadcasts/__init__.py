"""The broadcasts pages. `views` has the list and the editor, `sending_views` the send,
progress, steering and evidence routes; both add their routes to this blueprint."""

from flask import Blueprint

bp = Blueprint("broadcasts", __name__, url_prefix="/broadcasts")
