"""The owner's sign-in policy (Settings -> Security, people's permission): whether everyone
must sign in with a second factor, and how long a session may sit unused.

Requiring two-factor is refused to an owner who has none themselves (they would be sent to
enrol at their next sign-in, which is better done now), and turning it on ends the sessions
of everyone without a second factor in the same transaction: they sign in again, and are
sent to enrol before any other page (webapp/auth). The idle limit is read by the session
check on every request (broadside.core.owner_sessions); the web app keeps its cookie's
lifetime at least as long as the longest limit allowed here (`LONGEST_IDLE`).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core import owner_sessions
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.core.models import Owner, SiteSettings
from broadside.core.site_settings import get_settings

MIN_IDLE_HOURS = 1
MAX_IDLE_HOURS = 90 * 24
LONGEST_IDLE = timedelta(hours=MAX_IDLE_HOURS)


def requires_two_factor(session: Session) -> bool:
    """Reads only (a GET creates no settings row)."""
    return bool(session.scalar(select(SiteSettings.require_two_factor)
                               .where(SiteSettings.id == 1)))


def current(session: Session) -> tuple[bool, int]:
    """(required for everyone, idle hours) as saved; the defaults before the row exists.
    Reads only."""
    row = session.execute(select(SiteSettings.require_two_factor, SiteSettings.session_idle_hours)
                          .where(SiteSettings.id == 1)).first()
    if row is None:
        return False, owner_sessions.DEFAULT_IDLE_HOURS
    return bool(row[0]), int(row[1])


def clean_idle_hours(value: object) -> int:
    text = str(value if value is not None else "").strip()
    if not text.isascii() or not text.isdigit() or len(text) > 6 \
            or not MIN_IDLE_HOURS <= int(text) <= MAX_IDLE_HOURS:
        raise ValidationError(_("Give a whole number of hours from %(min_idle_hours)s to "
                                "%(max_idle_hours)s (90 days).",
                                min_idle_hours=MIN_IDLE_HOURS, max_idle_hours=MAX_IDLE_HOURS),
                              field="idle_hours")
    return int(text)


def update(session: Session, *, require_two_factor: bool, idle_hours: object,
           by_person_id: int) -> SiteSettings:
    """Save the policy, every value checked first (nothing half-written). Committed."""
    hours = clean_idle_hours(idle_hours)
    if require_two_factor and session.scalar(
            select(Owner.totp_enabled_at).where(Owner.id == by_person_id)) is None:
        raise ValidationError(_("Turn on two-factor sign-in for yourself first (above), then require it "
                                "for everyone."), field="require_two_factor")
    settings = get_settings(session)
    newly_required = require_two_factor and not settings.require_two_factor
    settings.require_two_factor = require_two_factor
    settings.session_idle_hours = hours
    if newly_required:
        owner_sessions.close_without_two_factor(session)
    session.commit()
    return settings
