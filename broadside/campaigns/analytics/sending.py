"""Tracking at Send: the one call the Send transaction makes (broadcasts/service.py)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from broadside.campaigns.analytics.modes import OFF, freeze
from broadside.campaigns.analytics.rewrite import store_links
from broadside.core.models import Broadcast


def freeze_tracking(session: Session, broadcast: Broadcast, html_template: str) -> None:
    """The broadcast's mode frozen (Settings' default if never chosen) and, when it tracks,
    its links stored with their counters at zero (those it tracks: rewrite.store_links), in the
    transaction that freezes its content."""
    freeze(session, broadcast)
    if broadcast.tracking != OFF:
        store_links(session, broadcast.id, html_template, broadcast.tracking)
