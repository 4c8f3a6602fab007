"""The invitation email: who invites whom, with which role, and the single-use link (72
hours) to `/invitation/<token>` where the invitee sets their name and password.

The link is made only from BASE_URL, never from the request's Host header, so a forged Host
cannot point the email at someone else's site. The token itself comes from
broadside.core.invitations (only its SHA-256 is stored). Nothing here sends: the web app
queues the message on the transactional stream (kind KIND).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

KIND = "invitation"  # TransactionalMessage.kind
PATH = "/invitation/"
SUBJECT = "You are invited to Broadside"


@dataclass(frozen=True)
class InvitationEmail:
    to_email: str
    subject: str
    html: str
    text: str


def link(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}{PATH}{token}"


def invitation_email(to_email: str, token: str, *, role_label: str, role_description: str,
                     inviter: str | None, base_url: str) -> InvitationEmail:
    """Plain words and the link: who invites, the role and what it may do, that the link works
    once and for 72 hours, and that ignoring it changes nothing."""
    url = link(base_url, token)
    site = base_url.rstrip("/")
    by = f"{inviter} invites you" if inviter else "You are invited"
    text = (
        "Hello,\n\n"
        f"{by} to join Broadside at {site} as {role_label.lower()}: {role_description}\n\n"
        "Choose your name and password here (the link works once, for 72 hours):\n\n"
        f"{url}\n\n"
        "If you did not expect this, ignore this email: nothing happens without you.\n"
    )
    e = html.escape
    body = (
        "<!doctype html><html><body style=\"font-family: sans-serif; line-height: 1.5; "
        "color: #1a1a1a\">"
        "<p>Hello,</p>"
        f"<p>{e(by)} to join Broadside at {e(site)} as <strong>{e(role_label.lower())}</strong>: "
        f"{e(role_description)}</p>"
        f"<p><a href=\"{e(url)}\" style=\"display: inline-block; padding: 10px 16px; "
        "background: #1f5fbf; color: #ffffff; text-decoration: none; border-radius: 4px\">"
        "Accept the invitation</a></p>"
        "<p>The link works once, for 72 hours. If the button does not work, copy this address "
        f"into your browser:<br><span style=\"word-break: break-all\">{e(url)}</span></p>"
        "<p>If you did not expect this, ignore this email: nothing happens without you.</p>"
        "</body></html>"
    )
    return InvitationEmail(to_email=to_email, subject=SUBJECT, html=body, text=text)
