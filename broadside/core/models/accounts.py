"""The people who sign in (`Owner`: a person of any role), their sessions, invitations,
recovery codes and API tokens, and the installation's settings."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, Float, ForeignKey, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow


class Owner(Model):
    """A person who signs in, with one of the five roles (broadside.core.roles; the table kept
    its first name, `owners`, from when everyone was an owner). The members below the columns
    are what Flask-Login asks of a signed-in user (written out rather than inherited, so the
    domain does not import the web's login)."""

    __tablename__ = "owners"
    __table_args__ = (
        CheckConstraint("role IN ('owner', 'admin', 'sender', 'writer', 'viewer')",
                        name="role"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # What the person may do (broadside.core.roles.PERMISSIONS); everyone who signed in before
    # teams existed was an owner, and stays one.
    role: Mapped[str] = mapped_column(String(16), default="owner", server_default="owner")
    # The name they gave when they accepted their invitation ("" for those made before).
    name: Mapped[str] = mapped_column(String(200), default="", server_default="")
    # The language of their pages (a tag of broadside.core.i18n.LOCALES); None: their
    # browser's.
    locale: Mapped[str | None] = mapped_column(String(35))
    # Two-factor sign-in (TOTP, RFC 6238): the base32 secret, set at enrolment and kept while
    # unconfirmed; `totp_enabled_at` set once a first code confirmed it. `totp_last_step` is the
    # time step of the last code accepted: a code of that step or an earlier one is refused,
    # so one code signs in once (a guarded UPDATE moves it forward only).
    totp_secret: Mapped[str | None] = mapped_column(String(64))
    totp_enabled_at: Mapped[datetime | None]
    totp_last_step: Mapped[int | None] = mapped_column(BigInteger)
    # One more at every password change (written only by broadside.core.accounts.set_password).
    # A session carries the epoch it was opened in (`get_id`) and counts only while it is
    # still the owner's, so a new password signs every other session out; a reset link is
    # signed over it, so the link works once (broadside.mail.password_reset).
    session_epoch: Mapped[int] = mapped_column(default=0, server_default="0")

    is_authenticated = True
    is_active = True
    is_anonymous = False

    def get_id(self) -> str:
        """What the session keeps: the owner and the epoch it was opened in (`id:epoch`;
        webapp.security's loader honours it only while the epoch is still the owner's)."""
        return f"{self.id}:{self.session_epoch}"


class OwnerSession(Model):
    """One browser signed in as an owner (written only by broadside.core.owner_sessions).

    The browser's cookie holds a random token; only its SHA-256 is kept here, so a copy of
    the database (a backup) holds no session. Signing out deletes the row, which ends that
    browser's session on the server (a copied cookie stops working) and no other; a new
    password deletes all of the owner's rows, in the UPDATE's transaction."""

    __tablename__ = "owner_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Moved on at most every few minutes (a write per page would cost SQLite a lock each
    # time); a session idle longer than the cookie can live is ended.
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    # What Settings -> Security shows of it: the browser's User-Agent (cut to 300 characters)
    # and the network it signed in from (an IPv4 /24 or an IPv6 /48: an approximate place,
    # never the whole address).
    user_agent: Mapped[str] = mapped_column(String(300), default="", server_default="")
    network: Mapped[str] = mapped_column(String(64), default="", server_default="")


class Invitation(Model):
    """An invitation to join with a role: a single-use link valid 72 hours, mailed through the
    transactional stream. Only the SHA-256 of its token is kept."""

    __tablename__ = "invitations"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320), index=True)
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    invited_by: Mapped[int | None]  # a person's id; no FOREIGN KEY: the inviter may leave
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    # Set once, by a guarded UPDATE (`accepted_at IS NULL AND revoked_at IS NULL`): of two
    # uses of one link, one wins.
    accepted_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class RecoveryCode(Model):
    """One of a person's ten single-use recovery codes for two-factor sign-in, stored hashed;
    used once (`used_at`, a guarded UPDATE)."""

    __tablename__ = "recovery_codes"

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    code_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    used_at: Mapped[datetime | None]


class ApiToken(Model):
    """A bearer token for `/api/...`; only its SHA-256 is stored. It belongs to a person and
    carries at most their role (read-only: at most a viewer's); removing the person deletes
    it (the cascade)."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    # A read-only token may only GET; a full one may also change things.
    read_only: Mapped[bool] = mapped_column(default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class SiteSettings(Model):
    """One row (id = 1): what the owner sets in the browser rather than the environment."""

    __tablename__ = "site_settings"

    id: Mapped[int] = mapped_column(primary_key=True)
    sender_name: Mapped[str] = mapped_column(String(200), default="")
    sender_email: Mapped[str] = mapped_column(String(320), default="")
    postal_address: Mapped[str] = mapped_column(Text, default="")
    time_zone: Mapped[str] = mapped_column(String(64), default="UTC")
    # The frequency cap new broadcasts start with (hours; None: no cap).
    default_skip_if_received_within_hours: Mapped[int | None]
    # The hourly cap counts sends after this moment; "reset" moves it to now, deleting nothing.
    hourly_window_reset_at: Mapped[datetime | None]
    # The default identity's pause (it is not a row: broadside.core.models.identities); NULL: not
    # paused. Written only by broadside.delivery.identities.lifecycle.
    default_pause_reason: Mapped[str | None] = mapped_column(Text)
    # Settings -> Design (written only by broadside.mail.design and broadside.mail.signup_texts).
    # The email layout's brand colour (#rrggbb), width in px and font (a key of design.FONTS);
    # the owner's footer text, printed above the postal address.
    brand_colour: Mapped[str] = mapped_column(String(7), default="#1f5fbf",
                                              server_default="#1f5fbf")
    email_width: Mapped[int] = mapped_column(default=600, server_default="600")
    email_font: Mapped[str] = mapped_column(String(20), default="system", server_default="system")
    footer_text: Mapped[str] = mapped_column(Text, default="", server_default="")
    # The logo: its file under the instance path (content hash + extension; NULL: no logo),
    # its size in pixels, and its absolute URL made from BASE_URL when it was uploaded or the
    # design saved (emails need an absolute URL; the domain does not know BASE_URL).
    logo_file: Mapped[str | None] = mapped_column(String(80))
    logo_width: Mapped[int | None]
    logo_height: Mapped[int | None]
    logo_url: Mapped[str | None] = mapped_column(Text)
    # The owner's own words for the double opt-in email and the sign-up pages, by key
    # (broadside.mail.signup_texts.DEFAULTS); a key absent or NULL: the default text.
    signup_texts: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The language readers get when neither they nor their list has one (a language tag).
    default_language: Mapped[str] = mapped_column(String(35), default="en", server_default="en")
    # The owner's texts in other languages: {tag: {key: text}}, each key one of signup_texts'
    # or "footer_text"; a text absent there: the one above (broadside.mail.signup_texts).
    localized_texts: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Reader tracking new broadcasts start with (broadside.campaigns.analytics.modes): off unless the
    # owner chooses otherwise.
    default_tracking: Mapped[str] = mapped_column(String(16), default="off", server_default="off")
    # How long the step-by-step history (per-delivery events) of a settled broadcast is kept,
    # in days; NULL: forever (broadside.campaigns.broadcasts.compaction). Each delivery row keeps its
    # final state, reason, code and times whatever this says.
    history_retention_days: Mapped[int | None]
    # How long a transactional or test message keeps its rendered subject and body, in days
    # (broadside.delivery.content_retention): afterwards only their SHA-256 and the revision
    # they came from stay. A password reset's body is removed as soon as it is settled.
    content_retention_days: Mapped[int] = mapped_column(default=30, server_default="30")
    # The reputation guard's lines (broadside.feedback.reputation), in percent: Gmail's by
    # default. Written only by broadside.core.site_settings.update_reputation_lines.
    complaint_warning_pct: Mapped[float] = mapped_column(Float, default=0.1, server_default="0.1")
    complaint_limit_pct: Mapped[float] = mapped_column(Float, default=0.3, server_default="0.3")
    bounce_warning_pct: Mapped[float] = mapped_column(Float, default=2.0, server_default="2.0")
    bounce_limit_pct: Mapped[float] = mapped_column(Float, default=5.0, server_default="5.0")
    # Settings -> Security (owners only): everyone must sign in with a second factor (those
    # without one are sent to enrol after their password); and how long a session may sit
    # unused before it ends, in hours.
    require_two_factor: Mapped[bool] = mapped_column(default=False, server_default=false())
    # "Send again to those who did not open" is offered this many hours after a broadcast
    # finished sending (opens keep arriving for a day or so).
    resend_after_hours: Mapped[int] = mapped_column(default=24, server_default="24")
    session_idle_hours: Mapped[int] = mapped_column(default=24 * 31, server_default="744")
