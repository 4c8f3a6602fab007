"""The configuration as understood (secrets hidden), and whether BASE_URL can carry the links
in an email."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from broadside.core import mailbox_urls
from broadside.core.config import ENV_VARS
from broadside.core.logs import mask_query_passwords
from broadside.core.transport_urls import describe
from webapp.doctor.check import Check

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
SECRET_VARS = ("SECRET_KEY", "WEBHOOK_SECRET", "METRICS_TOKEN")
URL_VARS = ("SMTP_URL", "DATABASE_URL", "REDIS_URL", "BOUNCE_MAILBOX_URL")


def mask_url(value: str) -> str:
    """The URL with its passwords replaced by ****: `user:password@` and `?password=`."""
    if not value:
        return value
    parts = urlsplit(value)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:****@{host}")
    return urlunsplit(parts._replace(query=mask_query_passwords(parts.query)))


def shown_value(name: str, value: Any) -> str:
    """A configuration value as it may be printed: secrets never appear."""
    if name in SECRET_VARS:
        return f"set ({len(str(value))} characters, hidden)" if value else "unset"
    if name in URL_VARS:
        if not value:
            return "unset (messages go to the outbox folder)" if name == "SMTP_URL" else "unset"
        # A transport URL's key is its user part, and an SMTP login may be a token too.
        if name == "BOUNCE_MAILBOX_URL":
            return mailbox_urls.describe(str(value))
        return describe(str(value)) if name == "SMTP_URL" else mask_url(str(value))
    if value in ("", None):
        return "unset"
    return str(value)


def check_configuration(config: Mapping[str, Any]) -> Check:
    # Reaching this point means create_app parsed and validated every variable (a bad value
    # stops start-up with one line naming it); here we show what was understood.
    details = tuple(f"{name} = {shown_value(name, config.get(name))}" for name in ENV_VARS)
    return Check("configuration", True, f"{len(ENV_VARS)} variables parsed", details=details)


def check_base_url(base_url: str) -> Check:
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        return Check("BASE_URL", False, f"{base_url!r} is not a web address",
                     "set BASE_URL to the address people open, e.g. https://news.example.com")
    if parts.query or parts.fragment:
        return Check("BASE_URL", False, f"{base_url} has a query or fragment",
                     "set BASE_URL to the site's root address, without ?… or #…")
    if parts.scheme != "https" and host not in LOCAL_HOSTS:
        return Check("BASE_URL", False, f"{base_url} is not https",
                     "mail clients need an https one-click unsubscribe URL: serve Broadside "
                     "over TLS and set BASE_URL=https://…")
    note = " (local only: links in emails work on this machine alone)" if host in LOCAL_HOSTS else ""
    return Check("BASE_URL", True, f"{base_url}{note}")
