"""The owner's way back in: a signed reset link that works once, for an hour, and its email.

The link is signed with `SECRET_KEY` under its own salt (SALT: part of the links' format,
pinned by tests/broadside/mail/test_link_salts.py) over the owner's id, their `session_epoch`
and a fingerprint of their password hash. Setting a new password moves the epoch on and
changes the hash (`broadside.core.accounts.set_password`, guarded on both), so a link works
once, and any newer password change (another link, `owner reset-password`) ends it too.
itsdangerous' timestamp bounds it to LINK_MAX_AGE_SECONDS; `ResetLinks.clock` is the clock it
is signed and read by (tests move it, nobody sleeps).

A link is made only from BASE_URL, never from the request's Host header, so a forged Host
cannot point the email at someone else's site. Nothing here sends: the web app queues the
message on the transactional stream.
"""

from __future__ import annotations

import hashlib
import html
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from itsdangerous import BadData, SignatureExpired, TimestampSigner, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from broadside.core.errors import DomainError
from broadside.core.models import Owner

SALT = "broadside.password-reset.v1"
LINK_MAX_AGE_SECONDS = 3600
MAX_TOKEN_LENGTH = 512
PATH = "/password/reset/"
SUBJECT = "Choose a new Broadside password"


# Why a link cannot be used, as its page says it: (heading, what to do).
REFUSALS = {
    "expired": ("This link has expired",
                "A reset link works for one hour after it is sent. Ask for a new one; it "
                "arrives in a minute or two."),
    "broken": ("This link is not complete",
               "It may have been cut short or changed on its way from the email. Open it again "
               "from the email, or ask for a new one."),
    "used": ("This link was already used",
             "It has already been used, or the password was changed after it was sent. If you "
             "still need a new password, ask for a new link."),
}


class ResetLinkRefused(DomainError):
    """A reset link that cannot be used: `reason` is a key of REFUSALS, `heading` and the
    message its words."""

    status_code = 400

    def __init__(self, reason: str) -> None:
        self.heading, message = REFUSALS[reason]
        super().__init__(message)
        self.reason = reason


class _ClockedSigner(TimestampSigner):
    """itsdangerous' timestamp signer, reading the time from a clock it is given."""

    def __init__(self, *args, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock

    def get_timestamp(self) -> int:
        return int(self.clock())


def fingerprint(password_hash: str) -> str:
    """A short digest of the stored hash: the link names which password it replaces without
    carrying any of the hash itself."""
    return hashlib.sha256(password_hash.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ResetEmail:
    to_email: str
    subject: str
    html: str
    text: str


@dataclass(frozen=True)
class ResetLinks:
    """What reset links are made and read with: the secret, the site's URL, the clock."""

    secret_key: str
    base_url: str
    clock: Callable[[], float] = field(default=time.time)

    def _serializer(self) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(self.secret_key, salt=SALT, signer=_ClockedSigner,
                                      signer_kwargs={"clock": self.clock})

    def make(self, owner: Owner) -> str:
        return self._serializer().dumps(
            [owner.id, owner.session_epoch, fingerprint(owner.password_hash)])

    def url(self, token: str) -> str:
        return f"{self.base_url.rstrip('/')}{PATH}{token}"

    def owner_of(self, session: Session, token: str) -> Owner:
        """The owner whose password this link may change, or ResetLinkRefused saying why not.
        Any string at all gets one of the two: no malformed link is an error."""
        if not token or len(token) > MAX_TOKEN_LENGTH:
            raise ResetLinkRefused("broken")
        try:
            data = self._serializer().loads(token, max_age=LINK_MAX_AGE_SECONDS)
        except SignatureExpired:
            # (the signature is checked first: only a genuine link is ever "expired")
            raise ResetLinkRefused("expired") from None
        except (BadData, UnicodeError, ValueError):
            raise ResetLinkRefused("broken") from None
        if not (isinstance(data, list) and len(data) == 3
                and all(isinstance(v, int) and not isinstance(v, bool) for v in data[:2])
                and isinstance(data[2], str)):
            raise ResetLinkRefused("broken")
        owner_id, epoch, print_ = data
        owner = session.get(Owner, owner_id) if 0 < owner_id < 2**31 else None
        if owner is None or owner.session_epoch != epoch or \
                fingerprint(owner.password_hash) != print_:
            raise ResetLinkRefused("used")
        return owner

    def email(self, owner: Owner) -> ResetEmail:
        """The email that carries a fresh link for this owner."""
        return reset_email(owner.email, self.url(self.make(owner)), site=self.base_url)


def reset_email(to_email: str, link: str, *, site: str) -> ResetEmail:
    """Plain words and the link: what was asked, that it works once and for an hour, and that
    ignoring it changes nothing."""
    text = (
        "Hello,\n\n"
        f"Somebody, hopefully you, asked for a new password for the Broadside account "
        f"{to_email} at {site}.\n\n"
        "Choose a new password here (the link works once, for one hour):\n\n"
        f"{link}\n\n"
        "Setting it signs out every other browser signed in to this account.\n\n"
        "If you did not ask, ignore this email: your password stays as it is.\n"
    )
    e = html.escape
    body = (
        "<!doctype html><html><body style=\"font-family: sans-serif; line-height: 1.5; "
        "color: #1a1a1a\">"
        "<p>Hello,</p>"
        f"<p>Somebody, hopefully you, asked for a new password for the Broadside account "
        f"<strong>{e(to_email)}</strong> at {e(site)}.</p>"
        f"<p><a href=\"{e(link)}\" style=\"display: inline-block; padding: 10px 16px; "
        "background: #1f5fbf; color: #ffffff; text-decoration: none; border-radius: 4px\">"
        "Choose a new password</a></p>"
        "<p>The link works once, for one hour. If the button does not work, copy this address "
        f"into your browser:<br><span style=\"word-break: break-all\">{e(link)}</span></p>"
        "<p>Setting it signs out every other browser signed in to this account.</p>"
        "<p>If you did not ask, ignore this email: your password stays as it is.</p>"
        "</body></html>"
    )
    return ResetEmail(to_email=to_email, subject=SUBJECT, html=body, text=text)
