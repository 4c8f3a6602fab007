"""An invitation and its email, one commit: the invitation row (broadside.core.invitations)
and its message on the transactional stream (kind `invitation`) are written together by
`queue_transactional`'s commit, so there is never an invitation whose email was not queued,
nor an email for an invitation that does not exist. Used by Settings -> People and
`POST /api/users`."""

from __future__ import annotations

from flask import current_app

from broadside.core import invitations, roles
from broadside.core.models import Invitation, Owner
from broadside.delivery.transactional import queue_transactional
from broadside.mail import invitation as invitation_mail
from webapp.extensions import db, get_jobs


def _queue(invitation: Invitation, token: str, inviter: str | None) -> Invitation:
    message = invitation_mail.invitation_email(
        invitation.email, token, role_label=roles.LABELS[invitation.role],
        role_description=roles.DESCRIPTIONS[invitation.role], inviter=inviter,
        base_url=current_app.config["BASE_URL"])
    queue_transactional(db.session, get_jobs(), kind=invitation_mail.KIND,
                        to_email=invitation.email, subject=message.subject, html=message.html,
                        text=message.text)  # commits the invitation with its message
    db.session.refresh(invitation)
    return invitation


def invite(inviter: Owner, email: object, role: object) -> Invitation:
    """Invite `email` with `role` on behalf of `inviter` (the signed-in person, or the API
    token's), and queue the email. The domain's refusals (422, 403, 409) pass through, with
    nothing written."""
    invitation, token = invitations.invite(db.session, email, role, inviter_id=inviter.id,
                                           inviter_role=inviter.role, commit=False)
    return _queue(invitation, token, inviter.name or inviter.email)


def resend(inviter: Owner, invitation_id: int) -> Invitation:
    """A fresh link for an open invitation (the old one stops working), mailed."""
    invitation, token = invitations.resend(db.session, invitation_id, inviter_id=inviter.id,
                                           inviter_role=inviter.role, commit=False)
    return _queue(invitation, token, inviter.name or inviter.email)
