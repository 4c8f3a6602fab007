"""Attachments on the compose pages (`views`: the upload that answers with the attachments
field redrawn, and the helpers the field's include reads); its routes attach to this
blueprint. The API's are webapp/api/attachments.py."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("attachments", __name__, url_prefix="/attachments")
defaults(bp, read=roles.VIEW, change=roles.WRITE)
