"""An installation upgraded from any earlier version reads right through the API.

One pass per database: at each revision from the first to the newest, the rows that
revision's schema holds are written (tests/webapp/upgrade_eras.py: lists, people with
attributes, a broadcast in every state with its revision and deliveries, an identity, an
automation with steps and messages, events), then the schema moves one migration on. At the
newest, everything written in every era is read back through /api/..., so a migration that
loses or mangles an old row, or code that cannot read a row an old version wrote, fails here.

And the newest migration also goes back: down one step and up again with rows in what it
added, the schema then equal to the models."""

from __future__ import annotations

import time
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask import Flask
from flask_migrate import downgrade, upgrade
from sqlalchemy import text

from broadside.core.accounts import create_token
from broadside.core.models import Owner
from tests.conftest import REDIS_URL
from tests.fresh_databases import empty_database
from tests.helpers import SECRET_KEY
from tests.own_apps import own_app
from tests.webapp.upgrade_eras import (
    BROADCAST_STATES,
    DELIVERIES,
    TABLES,
    WHEN,
    Era,
    EraWriter,
    write_era,
)
from webapp.extensions import db


def _config(url: str, tmp_path: Path, namespace: str) -> dict:
    return {"TESTING": True, "DATABASE_URL": url, "REDIS_URL": REDIS_URL, "SECRET_KEY": SECRET_KEY,
            "BROADSIDE_NAMESPACE": namespace, "INSTANCE_PATH": str(tmp_path / "instance")}


def revisions(app: Flask) -> list[str]:
    """Every migration, the first first."""
    migrate = app.extensions["migrate"]
    script = ScriptDirectory.from_config(migrate.migrate.get_config(migrate.directory))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def schema_differences() -> list:
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return compare_metadata(context, db.metadata)


def _get(client, path: str, headers: dict):
    response = client.get(path, headers=headers)
    assert response.status_code == 200, (path, response.status_code, response.text[:500])
    return response.json


def paged(client, path: str, headers: dict) -> dict[int, dict]:
    """Every item of a paged API list, by id."""
    items, after = {}, ""
    while True:
        page = _get(client, f"{path}{after}", headers)
        items.update({item["id"]: item for item in page["items"]})
        if not page["next"]:
            return items
        after = f"&after={page['next']}"


def check_era(client, headers: dict, era: Era, lists: dict, people: dict, broadcasts: dict,
              automations: dict, identities: dict) -> None:
    where = f"rows written at {era.revision}"
    assert lists[era.list_id]["name"] == f"Weekly {era.revision}", where
    assert lists[era.list_id]["counts"] == {"active": 1, "unconfirmed": 1, "unsubscribed": 1}, where
    for person, status in (("ana", "active"), ("bo", "unconfirmed"), ("cy", "unsubscribed")):
        written = era.row("subscribers", era.people[person])
        body = people[era.people[person]]
        assert (body["email"], body["name"], body["attributes"], body["suppression"]) == (
            written["email"], written["name"], written["attributes"],
            written.get("suppression")), where
        assert body["locale"] == written.get("locale"), where
        assert body["subscriptions"] == [{"list_id": era.list_id, "status": status}], where
    for state in BROADCAST_STATES:
        broadcast_id = era.broadcasts[state]
        listed = broadcasts[broadcast_id]
        outcomes = [status for status, _ in DELIVERIES.get(state, ())]
        counts = {s: outcomes.count(s) for s in ("pending", "sending", "sent", "skipped",
                                                 "failed", "unknown")}
        assert (listed["status"], listed["subject"], listed["list_id"]) == (
            state, f"{state.title()} news {era.revision}", era.list_id), where
        assert listed["counts"] == {"total": len(outcomes), **counts}, where
        assert listed["identity_id"] == (era.identity_id if state == "sent" else None), where
        if state in ("paused", "sent"):  # one broadcast's own page (the rest: as listed)
            shown = _get(client, f"/api/broadcasts/{broadcast_id}", headers)
            assert (shown["status"], shown["total"], shown["counts"]) == (
                state, len(outcomes), counts), where
            assert shown["pause_reason"] == (
                "Paused by the owner" if state == "paused" else None), where
        if state in ("sending", "sent"):  # between them every status a delivery had
            rows = _get(client, f"/api/broadcasts/{broadcast_id}/deliveries", headers)
            emails = [era.row("subscribers", era.people[p])["email"] for p in ("ana", "bo", "cy")]
            expected = list(zip(emails, outcomes, strict=True))
            assert [(r["email"], r["status"]) for r in rows] == expected, where
    if era.identity_id is not None:
        identity = identities[era.identity_id]
        assert (identity["name"], identity["delay_ms"], identity["hourly_limit"],
                identity["status"], identity["webhook_secret_set"]) == (
            f"Product {era.revision}", 250, 1000, "active", True), where
        assert f"news{era.revision}@product.example" in identity["from"], where
        assert "smtp.product.example" in identity["transport"], where
        assert "s3cret" not in str(identity), where  # still masked
    if era.automation_id is not None:
        automation = automations[era.automation_id]
        assert (automation["name"], automation["status"], automation["trigger"]) == (
            f"Welcome {era.revision}", "enabled", {"type": "joined_list", "list_id": era.list_id})
        assert automation["entered"] == 1, where
        assert [(s["position"], s["delay"], s["subject"], s["counts"]["sent"],
                 s["counts"]["pending"]) for s in automation["steps"]] == [
            (1, "PT0S", "Welcome aboard", 1, 0), (2, "P2D", "Two days in", 0, 1)], where
        assert all(s["revision_id"] for s in automation["steps"]), where


def read_everything(app: Flask, eras: list[Era]) -> dict[int, dict]:
    """Every era's rows checked through the API; the broadcasts listed, by id."""
    owner = Owner(email="owner@example.com", password_hash="unused")
    db.session.add(owner)
    db.session.commit()
    _, plain = create_token(db.session, owner.id, "upgrade check")
    headers = {"Authorization": f"Bearer {plain}"}
    client = app.test_client()
    lists = {item["id"]: item for item in _get(client, "/api/lists", headers)}
    people = paged(client, "/api/subscribers?limit=1000", headers)
    broadcasts = paged(client, "/api/broadcasts?limit=500", headers)
    automations = {item["id"]: item for item in _get(client, "/api/automations", headers)}
    identities = {item["id"]: item for item in _get(client, "/api/identities", headers)}
    for era in eras:
        check_era(client, headers, era, lists, people, broadcasts, automations, identities)
    return broadcasts


def test_every_earlier_version_upgrades_and_reads_through_the_api(backend, tmp_path, namespace):
    started = time.monotonic()
    with empty_database(backend, tmp_path, "broadside_upgrade") as url, \
            own_app(_config(url, tmp_path, namespace)) as app:
        eras = []
        for revision in revisions(app):
            upgrade(revision=revision)
            with db.engine.begin() as connection:
                eras.append(write_era(connection, revision))
        migrated = time.monotonic()
        assert schema_differences() == []
        broadcasts = read_everything(app, eras)
        assert len(broadcasts) == len(eras) * len(BROADCAST_STATES)
        print(f"{backend}: migrations and writes {migrated - started:.1f} s")
    print(f"{backend}: {len(eras)} eras written, upgraded and read in "
          f"{time.monotonic() - started:.1f} s")


def write_what_the_newest_added(connection, era: Era) -> dict[str, int]:
    """Rows in the newest migration's tables and columns: a feed automation with its feed,
    step and item, an A/B test sent at readers' own hour, a resend, readers' time zones."""
    w = EraWriter(connection, era.revision, TABLES + ("feeds", "feed_items"), era)
    automation = w.insert("automations", name="Blog digest", name_key="blog digest",
                          trigger_type="feed", every_hours=12, priority=0, record_only=False,
                          status="enabled", created_at=WHEN, updated_at=WHEN)
    step = w.insert("automation_steps", automation_id=automation, position=1, delay="PT0S",
                    delay_seconds=0, subject="New on the blog", preheader="",
                    body="{{ feed.items }}", created_at=WHEN)
    feed = w.insert("feeds", automation_id=automation, url="https://blog.example/feed.xml",
                    mode="digest", every="weekly", at="09:00", weekday=0, created_at=WHEN)
    w.insert("feed_items", feed_id=feed, key="a" * 64, title="Hello", summary_html="<p>Hi</p>",
             link="https://blog.example/hello", seen_at=WHEN, baseline=False,
             broadcast_id=era.broadcasts["sent"])
    sent = era.broadcasts["sent"]
    w.update("broadcasts", sent, ab_seed=1234567, ab_winner=1, ab_decided_at=WHEN,
             ab_test={"variants": [{"subject": "Sent news"}, {"subject": "Fresh news"}],
                      "share": 20, "measure": "opens", "wait_hours": 4, "default": 0},
             ab_result={"clear": True, "rates": [0.21, 0.34]}, send_at_local="09:00",
             local_due={"Europe/Berlin": "2026-03-02T08:00:00", "": "2026-03-02T09:00:00"})
    resend = w.insert("broadcasts", list_id=era.list_id, status="draft", subject="Did you miss it?",
                      preheader="", body="Again.", created_at=WHEN, updated_at=WHEN,
                      auto_resumes=0, total=0, send_rate=0.0, resend_of_id=sent)
    tables = w.meta.tables
    connection.execute(tables["deliveries"].update().where(
        tables["deliveries"].c.broadcast_id == sent).values(variant=1))
    connection.execute(tables["revisions"].update().where(
        tables["revisions"].c.broadcast_id == sent).values(variants={"1": {"subject": "Fresh news"}}))
    connection.execute(tables["subscribers"].update().where(
        tables["subscribers"].c.id == era.people["bo"]).values(timezone="Europe/Berlin"))
    connection.execute(tables["mailing_lists"].update().where(
        tables["mailing_lists"].c.id == era.list_id).values(no_tracking=True))
    return {"feed_automation": automation, "feed_step": step, "resend": resend}


def test_the_engagement_migration_downgrades_and_upgrades_again(backend, tmp_path, namespace):
    """With rows in what 0038 (engagement) added, down one step and up again: a feed
    automation (which the older schema cannot hold) goes whole, its steps with it; every
    other row stays and reads as before; the schema then equals the models. (The newest,
    0039, is taken down and up in tests/webapp/test_shared_files.py.)"""
    with empty_database(backend, tmp_path, "broadside_upgrade") as url, \
            own_app(_config(url, tmp_path, namespace)) as app:
        previous, head = "0037", "0038"
        assert head in revisions(app)
        upgrade(revision=head)
        with db.engine.begin() as connection:
            era = write_era(connection, head)
            added = write_what_the_newest_added(connection, era)
        downgrade(revision=previous)
        with db.engine.connect() as connection:
            assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == previous
            left = connection.execute(text("SELECT count(*) FROM automation_steps WHERE automation_id "
                                           "NOT IN (SELECT id FROM automations)")).scalar()
            assert left == 0
            assert connection.execute(text("SELECT count(*) FROM automations")).scalar() == 1
        upgrade()
        assert schema_differences() == []
        broadcasts = read_everything(app, [era])
        assert broadcasts[added["resend"]]["status"] == "draft"
        assert len(broadcasts) == len(BROADCAST_STATES) + 1
