"""Settings -> People (`views`: the people, their roles, removal, pending invitations and the
invite form; owners only, the `people` permission) and the invitation's own page
(`invitation`: public, the link is the credential); their routes attach to this blueprint.
`mailing` invites and queues the email, for the page and the API alike."""

from flask import Blueprint

from broadside.core import roles
from webapp.permissions import defaults

bp = Blueprint("people", __name__)
defaults(bp, read=roles.PEOPLE, change=roles.PEOPLE)
