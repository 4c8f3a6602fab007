"""Settings -> Transactional templates (`views`: the list, the new and edit pages with the
preview and the test send, the delete); its routes attach to this blueprint."""

from flask import Blueprint

bp = Blueprint("transactional", __name__, url_prefix="/settings/transactional")
