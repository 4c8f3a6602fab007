"""Sending identities in the web app: the Settings page that lists, creates, edits, checks,
resumes and deletes them (`views.py`, blueprint `identities`) and its form (`form.py`). The
connection check of each identity's transport, which that page, `doctor` and the System page
share, is `webapp.doctor.identities`; each identity's DNS checks (SPF, DKIM, DMARC, MX) are
`dns_views.py`, which `webapp.doctor.dns` shares with `doctor`. The domain is
`broadside.delivery.identities` (and `broadside.delivery.dns_checks`).
"""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("identities", __name__, url_prefix="/settings/identities")
defaults(bp, read=roles.VIEW, change=roles.MANAGE)
