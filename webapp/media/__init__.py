"""The media library's pages (Media in the main navigation), the picker the body editors
include, and the public image files emails load. Routes are in `webapp/media/views.py` and
`webapp/media/files.py`, which `webapp.create_app` imports.

Who may: viewing the library needs `view`; uploading and editing alt text `write` (a writer
puts images in what they write); deleting `manage`, because an email already sent loses the
image (the library cannot see sent mail, only what may still send)."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("media", __name__, url_prefix="/media")
defaults(bp, read=roles.VIEW, change=roles.WRITE)
