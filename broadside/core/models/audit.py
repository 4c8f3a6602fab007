"""The audit log: one append-only row per change made by a person or an API token."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from broadside.core.db import Model
from broadside.core.timeutil import utcnow


class AuditEntry(Model):
    """Inserted, never updated or deleted (written only by broadside.core.audit). Who did it
    is kept twice: by id (no FOREIGN KEY: a removed person's rows stay) and in words as they
    were then (`actor`), so the row still reads after the person or token is gone. It never
    holds a secret, and never a subscriber's address (an erased person's rows stay, naming
    only their id)."""

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_actor_person", "actor_person_id", "id"),
        Index("ix_audit_log_action", "action", "id"),
        Index("ix_audit_log_object", "object_type", "object_id", "id"),
        Index("ix_audit_log_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    actor_person_id: Mapped[int | None]
    actor_token_id: Mapped[int | None]
    # "Ana Lima <ana@example.com>", or "token “deploy” of ana@example.com"
    actor: Mapped[str] = mapped_column(String(500), default="")
    # Where from: the client's address (behind the proxies of TRUSTED_PROXIES or
    # TRUSTED_PROXY_COUNT, the one they vouch for: webapp/proxies.py); whole, as an auditor
    # needs it, unlike a session's network.
    address: Mapped[str] = mapped_column(String(64), default="")
    # e.g. broadcast.send, settings.update, person.invite (broadside.core.audit)
    action: Mapped[str] = mapped_column(String(64))
    object_type: Mapped[str] = mapped_column(String(32), default="")
    object_id: Mapped[str | None] = mapped_column(String(64))
    summary: Mapped[str] = mapped_column(Text, default="")
    # For settings: {"before": {...}, "after": {...}} of what changed; never a secret.
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)
