"""`flask --app webapp backup PATH` and `flask --app webapp restore PATH`: the command line over
broadside.core.backup (which holds what a backup is and how it restores). Here: the app's
engine, instance folder, version and migrations passed in, and the printout."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import click
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from flask import Flask, current_app
from flask_migrate import upgrade

from broadside.core.backup.manifest import BackupError
from broadside.core.backup.restoring import Schema, restore_backup
from broadside.core.backup.taking import take_backup
from webapp.extensions import db


def broadside_version() -> str:
    try:
        return version("broadside")
    except PackageNotFoundError:
        return "unknown"


def _schema(app: Flask) -> Schema:
    migrate = app.extensions["migrate"]
    script = ScriptDirectory.from_config(migrate.migrate.get_config(migrate.directory))

    def known(revision: str) -> bool:
        try:
            return script.get_revision(revision) is not None
        except CommandError:
            return False

    def migrate_to(revision: str) -> None:
        db.session.remove()
        upgrade(revision=revision)

    return Schema(head=str(script.get_current_head()), known=known, migrate=migrate_to)


@click.command("backup")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--with-secrets", is_flag=True,
              help="Keep the secrets (transport passwords and API keys, webhook and DKIM keys, "
                   "two-factor secrets, the instance's secret key) in the archive. Without it "
                   "they are left out and must be entered again after a restore.")
def backup_command(path: Path, with_secrets: bool) -> None:
    """Write one archive (PATH: .tar, or .tar.gz / .tgz compressed) of the database, copied
    consistently while Broadside runs, the instance's files and a manifest."""
    app = current_app
    db.session.remove()
    try:
        manifest = take_backup(db.engine, Path(app.instance_path), path,
                               with_secrets=with_secrets, version=broadside_version())
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    rows = sum(manifest.tables.values())
    click.echo(f"Backed up {manifest.database} (schema {manifest.revision}): "
               f"{len(manifest.tables)} tables, {rows} rows, {len(manifest.files)} files "
               f"into {path}.")
    if with_secrets:
        click.echo("Secrets are IN this archive: keep it as safe as the server itself.")
    else:
        click.echo(f"Secrets left out: {len(manifest.removed)} (restore says which to enter "
                   "again; --with-secrets keeps them).")


@click.command("restore")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def restore_command(path: Path) -> None:
    """Restore the archive at PATH onto this installation's EMPTY database (SQLite or
    PostgreSQL, whichever kind the backup came from). Stop the web and worker processes first."""
    app = current_app
    db.session.remove()
    try:
        restored = restore_backup(path, db.engine, Path(app.instance_path), _schema(app))
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    manifest = restored.manifest
    click.echo(f"Restored the backup of {manifest.created_at:%Y-%m-%d %H:%M} UTC "
               f"({manifest.database}, Broadside {manifest.version}, schema "
               f"{manifest.revision}) into {db.engine.dialect.name}.")
    click.echo(f"Tables: {len(restored.tables)}, rows: {sum(restored.tables.values())} "
               "(every count checked against the backup's).")
    for name, count in sorted(restored.tables.items()):
        if count:
            click.echo(f"    {name}: {count}")
    click.echo(f"Files: {len(restored.files)}"
               + (f" ({', '.join(restored.files[:5])}{', …' if len(restored.files) > 5 else ''})"
                  if restored.files else ""))
    if restored.upgraded:
        click.echo(f"Schema upgraded from {manifest.revision} to the newest.")
    if manifest.secrets:
        click.echo("Secrets were in the backup and are restored.")
        if "secret_key" in restored.files:
            click.echo("instance/secret_key is the old installation's again (a SECRET_KEY in "
                       "the environment still wins over it).")
    else:
        click.echo("Secrets were not in the backup. Enter these again:" if manifest.removed
                   else "Secrets were not in the backup; none were set.")
        for item in manifest.removed:
            click.echo(f"    {item['table']} {item['row']!r}: {item['words']}")
        click.echo("The instance's secret key was not in the backup either: set SECRET_KEY (or "
                   "instance/secret_key) to the old installation's, or the links in emails "
                   "already sent (unsubscribe, confirm) stop working.")
    click.echo("Start the web and worker processes: a broadcast that was sending resumes; "
               "rows that were in flight become `unknown` and are never sent again.")


def register_backup_commands(app: Flask) -> None:
    app.cli.add_command(backup_command)
    app.cli.add_command(restore_command)
