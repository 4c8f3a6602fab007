"""The before and after of a settings-like change, for its audit row: a registry from
endpoint to the snapshot of what it may change, read before the view and again at the commit,
keeping only the fields that changed.

Secrets never enter the log: an identity's transport and bounce mailbox URLs are kept in
their shown form (every secret masked, broadside.core.transport_urls.describe), and each
secret (a password or API key in a URL, the webhook secret, the DKIM key, a webhook
endpoint's signing secret) is compared by its SHA-256 in memory only: when one changed, the
row says "changed", never a value or a digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.core import mailbox_urls, transport_urls
from broadside.core.models import Identity, WebhookEndpoint
from broadside.core.site_settings import get_settings

Snapshot = dict[str, dict[str, Any]]  # object id ("" for the Settings row) -> its fields
SECRET = "changed"  # what a changed secret reads as, before and after

_SETTINGS_FIELDS = (
    "sender_name", "sender_email", "postal_address", "time_zone",
    "default_skip_if_received_within_hours", "default_tracking", "history_retention_days",
    "content_retention_days", "complaint_warning_pct", "complaint_limit_pct",
    "bounce_warning_pct", "bounce_limit_pct", "require_two_factor", "session_idle_hours",
    "brand_colour", "email_width", "email_font", "footer_text", "logo_file", "logo_width",
    "logo_height", "logo_url", "signup_texts", "default_pause_reason",
)
_IDENTITY_FIELDS = ("name", "from_name", "from_email", "delay_ms", "hourly_limit",
                    "account_rate", "postal_address", "verp_domain", "dkim_selector", "status",
                    "pause_reason")


def _secret(*values: object) -> str:
    """A secret's fingerprint, compared in memory only and never written anywhere."""
    return "\x00" + hashlib.sha256(repr(values).encode()).hexdigest()


def settings_row(session: Session) -> Snapshot:
    """The Settings row (made with its defaults on a fresh install, in the change's own
    transaction, so a first save shows what it changed from the defaults)."""
    row = get_settings(session)
    return {"": {name: getattr(row, name) for name in _SETTINGS_FIELDS}}


def identities(session: Session) -> Snapshot:
    found: Snapshot = {}
    for row in session.scalars(select(Identity).order_by(Identity.id)):
        fields = {name: getattr(row, name) for name in _IDENTITY_FIELDS}
        fields["transport"] = transport_urls.describe(row.transport_url)
        fields["bounce_mailbox"] = (mailbox_urls.describe(row.bounce_mailbox_url)
                                    if row.bounce_mailbox_url else "")
        fields["transport_secrets"] = _secret(sorted(transport_urls.secrets_in_url(row.transport_url)))
        fields["bounce_mailbox_secrets"] = _secret(
            sorted(mailbox_urls.secrets_in_url(row.bounce_mailbox_url)))
        fields["webhook_secret"] = _secret(row.webhook_secret)
        fields["dkim_key"] = _secret(row.dkim_private_key)
        found[str(row.id)] = fields
    return found


def webhook_endpoints(session: Session) -> Snapshot:
    return {str(row.id): {"url": row.url, "events": row.events, "status": row.status,
                          "disabled_reason": row.disabled_reason, "secret": _secret(row.secret)}
            for row in session.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.id))}


_SETTINGS_ENDPOINTS = (
    "settings.update_sender", "settings.update_defaults", "settings.update_history",
    "settings.update_content", "settings.design_save", "settings.design_logo",
    "settings.design_logo_remove", "settings.design_texts", "deliverability.update_lines",
    "analytics.set_default", "identities.resume_default",
)
_IDENTITY_ENDPOINTS = (
    "identities.create", "identities.edit", "identities.delete", "identities.resume",
    "api.api_create_identity", "api.api_replace_identity", "api.api_delete_identity",
)
_WEBHOOK_ENDPOINTS = (
    "settings.create_webhook", "settings.webhook_delete", "settings.webhook_enable",
    "settings.webhook_secret", "api.api_create_webhook", "api.api_delete_webhook",
)
SNAPSHOTS: dict[str, Callable[[Session], Snapshot]] = {
    **dict.fromkeys(_SETTINGS_ENDPOINTS, settings_row),
    **dict.fromkeys(_IDENTITY_ENDPOINTS, identities),
    **dict.fromkeys(_WEBHOOK_ENDPOINTS, webhook_endpoints),
}


def snapshot_for(endpoint: str) -> Callable[[Session], Snapshot] | None:
    """The registry, and every Settings -> Security change (the Settings row's two-factor
    and idle-time lines; a person's own password changes nothing in it, so adds nothing)."""
    found = SNAPSHOTS.get(endpoint)
    if found is None and endpoint.startswith("security."):
        return settings_row
    return found


def _shown(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("\x00"):
        return SECRET
    if isinstance(value, int | float | bool | str | type(None) | dict | list):
        return value
    return str(value)


def changes(before: Snapshot, after: Snapshot) -> tuple[str | None, dict[str, Any]]:
    """What changed between two snapshots: the one object that changed (None when it was the
    Settings row, or several) and {"before": {...}, "after": {...}} of its changed fields
    (fields named "<id>.<field>" when several objects changed); empty when nothing did."""
    touched = [key for key in sorted(set(before) | set(after))
               if before.get(key) != after.get(key)]
    if not touched:
        return None, {}
    was: dict[str, Any] = {}
    now: dict[str, Any] = {}
    for key in touched:
        old, new = before.get(key) or {}, after.get(key) or {}
        prefix = f"{key}." if len(touched) > 1 and key else ""
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                was[prefix + name] = _shown(old.get(name)) if name in old else None
                now[prefix + name] = _shown(new.get(name)) if name in new else None
    only = touched[0] if len(touched) == 1 and touched[0] else None
    return only, {"before": was, "after": now}
