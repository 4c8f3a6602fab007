"""`flask --app webapp ...` commands: owner, tokens, worker (and `db` from Flask-Migrate)."""

from __future__ import annotations

import sys

import click
from flask import Flask
from flask.cli import AppGroup

from broadside.core import account_lookups, accounts
from broadside.core.errors import DomainError
from webapp.audit.hook import command as audit_command
from webapp.doctor.report import report
from webapp.extensions import db

owner_cli = AppGroup("owner", help="Manage owner accounts.")
tokens_cli = AppGroup("tokens", help="Manage API tokens.")
users_cli = AppGroup("users", help="Manage the people who sign in, and their roles.")


@owner_cli.command("create")
@click.argument("email")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def owner_create(email: str, password_stdin: bool) -> None:
    """Create an owner who can sign in to the dashboard."""
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        with audit_command("person.create", "person") as change:
            owner = accounts.create_owner(db.session, email, password)
            change.object_id = str(owner.id)
    except DomainError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"Created owner {owner.email}.")


@owner_cli.command("reset-password")
@click.argument("email")
def owner_reset_password(email: str) -> None:
    """Give an owner a new password and sign out all their sessions (no mail needed).

    The password is asked twice and never shown; from a pipe or a file (no terminal), the
    first line of standard input is the password."""
    owner = accounts.owner_by_email(db.session, email)
    if owner is None:
        raise click.ClickException(f"No owner signs in as {email.strip()!r}; nothing was changed. "
                                   "(`flask --app webapp owner create` makes one.)")
    stdin = click.get_text_stream("stdin")
    if stdin.isatty():
        password = click.prompt("New password", hide_input=True,
                                confirmation_prompt="Repeat the new password")
    else:
        password = stdin.readline().rstrip("\r\n")
    try:
        with audit_command("person.reset_password", "person", owner.id):
            owner = accounts.set_password(db.session, owner.id, password)
    except DomainError as exc:
        raise click.ClickException(f"{exc.message} Nothing was changed.") from None
    click.echo(f"New password set for {owner.email}. Every session signed in as "
               f"{owner.email} is signed out.")


@tokens_cli.command("create")
@click.argument("name")
@click.option("--owner", "owner_email", help="Owner the token belongs to (default: the first).")
@click.option("--read-only", is_flag=True, help="The token may only read (GET requests).")
def tokens_create(name: str, owner_email: str | None, read_only: bool) -> None:
    """Create an API token, full or read-only; the token itself is the last line printed."""
    owner = account_lookups.find_owner(db.session, owner_email)
    if owner is None:
        raise click.ClickException("No such owner: create one with `flask --app webapp owner create`.")
    try:
        with audit_command("token.create", "token") as change:
            token, plain = accounts.create_token(db.session, owner.id, name, read_only=read_only)
            change.object_id = str(token.id)
    except DomainError as exc:
        raise click.ClickException(exc.message) from None
    access = "read-only" if token.read_only else "full"
    click.echo(f"Token {token.name!r} (id {token.id}, {access}) for {owner.email}. "
               "It is shown only once:")
    click.echo(plain)


@tokens_cli.command("list")
def tokens_list() -> None:
    """List tokens (never their values)."""
    for token in account_lookups.tokens_by_id(db.session):
        state = "revoked" if token.revoked_at else "active"
        access = "read-only" if token.read_only else "full"
        click.echo(f"{token.id}\t{token.name}\t{token.prefix}…\t{access}\t{state}")


@tokens_cli.command("revoke")
@click.argument("token_id", type=int)
def tokens_revoke(token_id: int) -> None:
    try:
        with audit_command("token.revoke", "token", token_id):
            accounts.revoke_token(db.session, token_id)
    except DomainError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"Token {token_id} revoked.")


def register_cli(app: Flask) -> None:
    app.cli.add_command(owner_cli)
    app.cli.add_command(tokens_cli)
    app.cli.add_command(users_cli)

    # `flask --app webapp worker` comes from the `jobs` package itself, through pyproject's
    # `flask.commands` entry point: the web side never imports the worker.

    @app.cli.command("doctor")
    def doctor_command() -> None:
        """Check configuration, database, Redis, worker, SMTP and BASE_URL; exit 0 only if all pass."""
        sys.exit(report(app, echo=click.echo))
