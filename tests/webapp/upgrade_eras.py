"""Rows an installation of any earlier version holds, written with SQL against the tables as
that version's schema has them (reflected at each revision), for tests/webapp/test_upgrade_
from_any_version.py.

One row shape per table, with the values a real installation would hold for every column any
version ever had; at a revision, only the columns that exist then are written (a later
column is left to what its migration gives old rows). A required column this file does not
know (a future migration's) gets a plain value of its type, so the writer keeps working.
What was written is recorded per era, for the checks to compare the API's answers with."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, MetaData, inspect, types

BROADCAST_STATES = ("draft", "scheduled", "queued", "sending", "paused", "sent", "cancelled")
TABLES = ("mailing_lists", "subscribers", "subscriptions", "identities", "broadcasts", "revisions",
          "deliveries", "events", "automations", "automation_steps", "automation_revisions",
          "automation_entries", "automation_messages")
WHEN = datetime(2026, 3, 2, 9, 30)
POSTAL = "Acme Ltd\n1 Main Street\nSpringfield"

# Each broadcast state's deliveries (Ana, Bo, Cy), as its send had left them.
DELIVERIES: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "queued": (("pending", {}), ("pending", {}), ("pending", {})),
    "sending": (("sent", {"attempts": 1}), ("sending", {"attempts": 1}), ("pending", {})),
    "paused": (("sent", {"attempts": 1}), ("pending", {}), ("pending", {})),
    "sent": (("sent", {"attempts": 1}),
             ("skipped", {"reason": "not subscribed any more"}),
             ("failed", {"attempts": 1, "error_class": "recipient", "smtp_code": 550,
                         "reason": "550 5.1.1 <cy@example.net>: user unknown"})),
    "cancelled": (("sent", {"attempts": 1}), ("skipped", {"reason": "cancelled"}),
                  ("skipped", {"reason": "cancelled"})),
}


@dataclass
class Era:
    """What one revision's installation holds: ids and the values written."""

    revision: str
    list_id: int = 0
    people: dict[str, int] = field(default_factory=dict)  # ana, bo, cy -> subscriber id
    rows: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    broadcasts: dict[str, int] = field(default_factory=dict)  # state -> id
    identity_id: int | None = None
    automation_id: int | None = None

    def row(self, table: str, row_id: int) -> dict[str, Any]:
        return self.rows[(table, row_id)]


def _plain_value(column, table: str, era: str) -> Any:
    """A required column nobody here knows: a plain value of its type."""
    kind = column.type
    if isinstance(kind, types.Boolean):
        return False
    if isinstance(kind, types.Integer):
        return 0
    if isinstance(kind, types.Float | types.Numeric):
        return 0.0
    if isinstance(kind, types.DateTime):
        return WHEN
    if isinstance(kind, types.JSON):
        return {}
    if isinstance(kind, types.LargeBinary):
        return b""
    length = getattr(kind, "length", None)
    return f"{table}.{column.name} {era}"[: length or 200]


class EraWriter:
    """Writes one era's rows through one connection, against the tables as they are now."""

    def __init__(self, connection: Connection, revision: str, tables: tuple[str, ...] = TABLES,
                 era: Era | None = None) -> None:
        self.connection = connection
        self.era = era or Era(revision)
        present = set(inspect(connection).get_table_names())
        self.meta = MetaData()
        self.meta.reflect(connection, only=[t for t in tables if t in present])

    def has(self, table: str) -> bool:
        return table in self.meta.tables

    def insert(self, table: str, **values: Any) -> int:
        columns = self.meta.tables[table].c
        row = {name: value for name, value in values.items() if name in columns}
        for column in columns:
            if column.name in row or column.nullable or column.server_default is not None:
                continue
            if column.primary_key and column.autoincrement in (True, "auto"):
                continue
            row[column.name] = _plain_value(column, table, self.era.revision)
        result = self.connection.execute(self.meta.tables[table].insert().values(row))
        row_id = result.inserted_primary_key[0]
        self.era.rows[(table, row_id)] = row
        return row_id

    def update(self, table: str, row_id: int, **values: Any) -> None:
        found = self.meta.tables[table]
        values = {name: value for name, value in values.items() if name in found.c}
        if values:
            self.connection.execute(found.update().where(found.c.id == row_id).values(values))
            self.era.rows[(table, row_id)].update(values)


def write_era(connection: Connection, revision: str) -> Era:
    """Lists, people with attributes, a broadcast in every state with its revision and
    deliveries, an identity, an automation with its steps and messages, and events."""
    w = EraWriter(connection, revision)
    r = revision
    era = w.era
    era.list_id = w.insert("mailing_lists", name=f"Weekly {r}", description=f"The {r} letter",
                           signup_enabled=True, created_at=WHEN, language="de",
                           per_person_tracking=True, archive_enabled=True)
    people = {
        "ana": dict(email=f"ana.{r}@example.com", name="Ana Lima", locale="pt-BR",
                    timezone="America/Sao_Paulo",
                    attributes={"plan": "pro", "city": "São Paulo", "seats": int(r),
                                "tags": ["early", "beta"], "vip": True}),
        "bo": dict(email=f"bo.{r}@example.org", name="Bo Berg", attributes={"plan": "free"}),
        "cy": dict(email=f"cy.{r}@example.net", name="", attributes={}, suppression="bounced",
                   suppressed_at=WHEN, suppression_detail="550 5.1.1 user unknown"),
    }
    for key, values in people.items():
        era.people[key] = w.insert("subscribers", created_at=WHEN, soft_bounce_count=0, **values)
    statuses = {"ana": ("active", {"confirmed_at": WHEN}),
                "bo": ("unconfirmed", {"confirmation_sent_at": WHEN}),
                "cy": ("unsubscribed", {"unsubscribed_at": WHEN + timedelta(days=1),
                                        "unsubscribe_source": "link"})}
    for key, (status, more) in statuses.items():
        w.insert("subscriptions", subscriber_id=era.people[key], list_id=era.list_id,
                 status=status, created_at=WHEN, **more)
        w.insert("events", kind="subscribed", subscriber_id=era.people[key], list_id=era.list_id,
                 detail="api", created_at=WHEN)
    if w.has("identities"):
        era.identity_id = w.insert(
            "identities", name=f"Product {r}", name_key=f"product {r}", from_name="Product news",
            from_email=f"news{r}@product.example", delay_ms=250, hourly_limit=1000,
            transport_url="smtp://mailer:s3cret@smtp.product.example:587",
            postal_address=POSTAL, webhook_secret="whsec-era", status="active",
            created_at=WHEN, updated_at=WHEN)
    for state in BROADCAST_STATES:
        _broadcast(w, state)
    if w.has("automations"):
        _automation(w)
    return era


def _broadcast(w: EraWriter, state: str) -> None:
    era, r = w.era, w.era.revision
    outcomes = DELIVERIES.get(state, ())
    counts = {f"{status}_count": 0 for status in ("pending", "sending", "sent", "skipped",
                                                  "failed", "unknown")}
    for status, _ in outcomes:
        counts[f"{status}_count"] += 1
    times = {
        "scheduled_at": WHEN + timedelta(days=30) if state == "scheduled" else None,
        "queued_at": WHEN if state not in ("draft", "scheduled") else None,
        "started_at": WHEN if state in ("sending", "paused", "sent", "cancelled") else None,
        "finished_at": WHEN + timedelta(hours=1) if state in ("sent", "cancelled") else None,
    }
    broadcast_id = w.insert(
        "broadcasts", list_id=era.list_id, status=state, subject=f"{state.title()} news {r}",
        preheader="What happened this week", body=f"# Hello {{{{ name }}}}\n\nThe **{r}** issue.",
        identity_id=era.identity_id if state == "sent" else None,
        pause_reason="Paused by the owner" if state == "paused" else None,
        created_at=WHEN, updated_at=WHEN, auto_resumes=0, total=len(outcomes), send_rate=2.5,
        **counts, **{k: v for k, v in times.items() if v is not None})
    era.broadcasts[state] = broadcast_id
    if not outcomes:
        return
    w.insert("revisions", broadcast_id=broadcast_id, subject=f"{state.title()} news {r}",
             preheader="What happened this week", body_markdown=f"The **{r}** issue.",
             html_template=f"<p>The <strong>{r}</strong> issue.</p>",
             text_template=f"The {r} issue.", from_name="Acme", from_email="news@acme.example",
             postal_address=POSTAL, created_at=WHEN)
    for person, (status, more) in zip(("ana", "bo", "cy"), outcomes, strict=True):
        sent = {"sent_at": WHEN, "claimed_at": WHEN} if status == "sent" else {}
        delivery_id = w.insert("deliveries", broadcast_id=broadcast_id,
                               subscriber_id=era.people[person], list_id=era.list_id,
                               status=status, updated_at=WHEN, **{"attempts": 0, **sent, **more})
        if status == "sent":
            w.insert("events", kind="sent", broadcast_id=broadcast_id, delivery_id=delivery_id,
                     subscriber_id=era.people[person], detail="250 2.0.0 OK", created_at=WHEN)


def _automation(w: EraWriter) -> None:
    era, r = w.era, w.era.revision
    era.automation_id = w.insert(
        "automations", name=f"Welcome {r}", name_key=f"welcome {r}", trigger_type="joined_list",
        list_id=era.list_id, every_hours=12, priority=0, record_only=False, status="enabled",
        identity_id=era.identity_id, created_at=WHEN, updated_at=WHEN)
    for position, (delay, seconds, subject) in enumerate(
            (("PT0S", 0, "Welcome aboard"), ("P2D", 172_800, "Two days in")), start=1):
        step_id = w.insert("automation_steps", automation_id=era.automation_id,
                           position=position, delay=delay, delay_seconds=seconds,
                           subject=subject, preheader="", body=f"Hi {{{{ name }}}}, {subject}.",
                           created_at=WHEN)
        revision_id = w.insert(
            "automation_revisions", step_id=step_id, subject=subject, preheader="",
            body_markdown=f"Hi {{{{ name }}}}, {subject}.", html_template=f"<p>{subject}</p>",
            text_template=subject, from_name="Acme", from_email="news@acme.example",
            postal_address=POSTAL, created_at=WHEN)
        w.update("automation_steps", step_id, revision_id=revision_id)
        w.insert("automation_messages", automation_id=era.automation_id, step_id=step_id,
                 position=position, revision_id=revision_id, subscriber_id=era.people["ana"],
                 list_id=era.list_id, status="sent" if position == 1 else "pending",
                 due_at=WHEN + timedelta(seconds=seconds), attempts=1 if position == 1 else 0,
                 sent_at=WHEN if position == 1 else None)
    w.insert("automation_entries", automation_id=era.automation_id,
             subscriber_id=era.people["ana"], source="joined", list_id=era.list_id,
             entered_at=WHEN)
