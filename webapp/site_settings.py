"""The installation's owner-editable settings (one row, id = 1)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from webapp.models import SiteSettings


def get_settings(session: Session) -> SiteSettings:
    """The settings row, created with defaults on first use."""
    settings = session.get(SiteSettings, 1)
    if settings is None:
        settings = SiteSettings(id=1, sender_name="", sender_email="", postal_address="",
                                time_zone="UTC")
        session.add(settings)
        session.flush()
    return settings
