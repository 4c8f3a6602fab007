"""Settings -> Transactional templates (`views`: the list, the new and edit pages with the
preview and the test send, the delete); its routes attach to this blueprint."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("transactional", __name__, url_prefix="/settings/transactional")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
