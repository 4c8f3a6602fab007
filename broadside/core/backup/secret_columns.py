"""The columns that hold secrets, and what a backup without secrets keeps of each.

A backup leaves them out unless `--with-secrets` is given: the archive itself never holds
them (blanked in the copy before it is archived, never at restore). What stays is what an
owner needs to see what to enter again: a transport or mailbox URL keeps its scheme, host and
plain login, its password or key removed; the rest are emptied. Hashes (passwords, session,
token and recovery-code hashes) are not secrets: they stay, so everyone still signs in.

| table.column | kept | what the restored installation does |
|---|---|---|
| identities.transport_url | the URL without password or key | the provider refuses: paused, reason shown |
| identities.webhook_secret | "" | the provider's webhooks are refused until entered |
| identities.bounce_mailbox_url | the URL without its password | the mailbox's login fails, shown on System |
| identities.dkim_private_key | "" | mail goes unsigned until the key is entered |
| webhook_endpoints.secret | "" | the endpoint's messages are signed with an empty key |
| owners.totp_secret | NULL | a code is refused: a recovery code or `users reset-two-factor` |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broadside.core import mailbox_urls, transport_urls


def _without(found: set[str]) -> Callable[[str], str]:
    def scrub(url: str) -> str:
        for secret in sorted(found, key=len, reverse=True):
            url = url.replace(secret, "")
        return url
    return scrub


def _transport(url: str) -> str:
    return _without(transport_urls.secrets_in_url(url))(url)


def _mailbox(url: str) -> str:
    return _without(mailbox_urls.secrets_in_url(url))(url)


@dataclass(frozen=True)
class SecretColumn:
    table: str
    column: str
    words: str  # what to enter again, in the restore's printout
    kept: Callable[[str], str | None]


SECRET_COLUMNS = (
    SecretColumn("identities", "transport_url", "the transport's password or API key",
                 _transport),
    SecretColumn("identities", "webhook_secret", "the provider webhook's signing secret",
                 lambda _v: ""),
    SecretColumn("identities", "bounce_mailbox_url", "the bounce mailbox's password",
                 _mailbox),
    SecretColumn("identities", "dkim_private_key", "the DKIM private key", lambda _v: ""),
    SecretColumn("webhook_endpoints", "secret", "the webhook endpoint's signing secret",
                 lambda _v: ""),
    SecretColumn("owners", "totp_secret", "two-factor sign-in (set it up again: `flask --app "
                 "webapp users reset-two-factor EMAIL`, or sign in with a recovery code)",
                 lambda _v: None),
)

BY_TABLE: dict[str, tuple[SecretColumn, ...]] = {}
for _secret in SECRET_COLUMNS:
    BY_TABLE[_secret.table] = (*BY_TABLE.get(_secret.table, ()), _secret)

# How each table's row is named in the restore's printout.
_LABEL_COLUMNS = {"identities": "name", "webhook_endpoints": "url", "owners": "email"}


@dataclass(frozen=True)
class Removed:
    """One secret left out of the archive: where it was and what to enter again."""

    table: str
    row: str  # the row's name (an identity's name, an endpoint's URL, a person's address)
    column: str
    words: str

    def as_json(self) -> dict[str, str]:
        return {"table": self.table, "row": self.row, "column": self.column, "words": self.words}


def scrub_row(table: str, row: Mapping[str, Any]) -> tuple[dict[str, Any], list[Removed]]:
    """The row without its secrets, and what was removed (nothing for an empty value)."""
    secrets = BY_TABLE.get(table, ())
    if not secrets:
        return dict(row), []
    cleaned = dict(row)
    removed = []
    for secret in secrets:
        value = row.get(secret.column)
        if value in (None, ""):
            continue
        kept = secret.kept(str(value))
        if kept == value:
            continue  # nothing secret in it (a URL without password)
        cleaned[secret.column] = kept
        label = str(row.get(_LABEL_COLUMNS.get(table, "id"), row.get("id")))
        removed.append(Removed(table, label, secret.column, secret.words))
    return cleaned, removed
