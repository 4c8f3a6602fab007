"""What the backup tests share: a private PostgreSQL database made and dropped per test, every
table's rows read the same way from either kind of database, and an installation with one of
everything a backup must carry, secrets included."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select, update

from broadside.core.backup import rows
from broadside.core.models import Identity, MailingList, Owner, Subscriber, Subscription, WebhookEndpoint
from tests.fresh_databases import fresh_postgres  # noqa: F401 - the backup tests' import
from webapp.extensions import db

# The secrets the installation holds: none of them may be in an archive taken without them.
TRANSPORT_PASSWORD = "Tr4nsportSecret99"
IDENTITY_WEBHOOK_SECRET = "whsec_IdentitySecret31"
DKIM_KEY = "-----BEGIN PRIVATE KEY-----\nDkimSecret55\n-----END PRIVATE KEY-----\n"
TOTP_SECRET = "JBSWY3DPEHPK3PXPTOTPSECRET"
SECRETS = (TRANSPORT_PASSWORD, IDENTITY_WEBHOOK_SECRET, "DkimSecret55", TOTP_SECRET, "whsec_sss")
LOGO_NAME = "0123456789abcdef0123456789abcdef.png"


def table_rows(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows, by primary key, as the database's own schema types them."""
    with engine.connect() as connection:
        metadata = rows.reflect(connection)
        return {t.name: [dict(r) for r in connection.execute(rows.ordered(t)).mappings()]
                for t in rows.data_tables(metadata)}


def without_secrets(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The rows as a backup without secrets must restore them (written out here, not derived
    from the code under test)."""
    expected = {name: [dict(r) for r in table] for name, table in tables.items()}
    for row in expected["identities"]:
        row["transport_url"] = row["transport_url"].replace(TRANSPORT_PASSWORD, "")
        if row["webhook_secret"]:
            row["webhook_secret"] = ""
        row["dkim_private_key"] = ""
    for row in expected["webhook_endpoints"]:
        row["secret"] = ""
    for row in expected["owners"]:
        row["totp_secret"] = None
    return expected


def add_secrets_and_files(instance_path: Path, identity_id: int, person_id: int) -> None:
    """Give the seeded identity, endpoint and person their secrets, and the instance a logo."""
    db.session.execute(update(Identity).where(Identity.id == identity_id).values(
        transport_url=f"smtp://mailer:{TRANSPORT_PASSWORD}@127.0.0.1:9",
        webhook_secret=IDENTITY_WEBHOOK_SECRET, dkim_selector="s1", dkim_private_key=DKIM_KEY))
    # Disabled: its deliveries would be POSTed (and their attempts written) while the backup runs.
    db.session.execute(update(WebhookEndpoint).values(status="disabled"))
    db.session.execute(update(Owner).where(Owner.id == person_id).values(totp_secret=TOTP_SECRET))
    db.session.commit()
    brand = instance_path / "brand"
    brand.mkdir(parents=True, exist_ok=True)
    (brand / LOGO_NAME).write_bytes(b"\x89PNG a logo's bytes")


def readers(count: int) -> MailingList:
    """A list of `count` active subscribers with attributes."""
    mailing_list = MailingList(name="Backups", description="")
    db.session.add(mailing_list)
    db.session.flush()
    for i in range(count):
        person = Subscriber(email=f"backup{i:02d}@example.com", name=f"Backup {i}",
                            attributes={"plan": "pro" if i % 2 else "free", "seat": i})
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=mailing_list.id,
                                    status="active"))
    db.session.commit()
    return mailing_list


def archive_bytes(path: Path) -> bytes:
    """The archive as stored, decompressed when it is gzip."""
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def null_counts(engine: Engine) -> dict[str, dict[str, int]]:
    """Per table and column, how many rows hold SQL NULL: what reading rows back cannot tell
    apart from a JSON column's `null`, and `IS NULL` can."""
    counts: dict[str, dict[str, int]] = {}
    with engine.connect() as connection:
        for table in rows.data_tables(rows.reflect(connection)):
            columns = list(table.columns)
            found = connection.execute(select(*(
                func.count().filter(column.is_(None)) for column in columns))).one()
            counts[table.name] = {c.name: int(n) for c, n in zip(columns, found, strict=True)}
    return counts
