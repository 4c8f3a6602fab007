"""Settings -> Security (blueprint `security`, /settings/security): one's own password,
two-factor sign-in and sessions (`views.py`, permission `self`: every role), and the owner's
sign-in policy (`policy.py`, permission `people`). The domain: broadside.core.two_factor,
broadside.core.owner_sessions, broadside.core.sign_in_policy, broadside.core.accounts.
"""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("security", __name__, url_prefix="/settings/security")
defaults(bp, read=roles.SELF, change=roles.SELF)
