"""`flask --app webapp ...` commands: users, owner, tokens, worker, backup and restore
(webapp/backup_commands.py; and `db` from Flask-Migrate). Each change a command makes writes
its audit row (actor: the command line) in the change's own transaction."""

from __future__ import annotations

import sys

import click
from flask import Flask
from flask.cli import AppGroup

from broadside.core import account_lookups, accounts, actors, audit, people, roles, sign_in_policy, two_factor
from broadside.core.errors import DomainError
from webapp.audit.hook import command as audit_command
from webapp.backup_commands import register_backup_commands
from webapp.doctor.report import report
from webapp.extensions import db

owner_cli = AppGroup("owner", help="Manage owner accounts.")
tokens_cli = AppGroup("tokens", help="Manage API tokens.")
users_cli = AppGroup("users", help="Manage the people who sign in, and their roles.")


def _password(password_stdin: bool) -> str:
    if password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt=True)


def _create(email: str, password: str, role: str) -> None:
    try:
        person = accounts.create_person(db.session, email, password, role=role, commit=False)
        audit.record(db.session, "person.create", object_type="person", object_id=person.id,
                     summary=f"created {person.email} as {role}",
                     details={"email": person.email, "role": role}, actor=actors.COMMAND_LINE)
        db.session.commit()
    except DomainError as exc:
        db.session.rollback()
        raise click.ClickException(f"{exc.message} Nothing was changed.") from None
    click.echo(f"Created {person.email} ({roles.LABELS[role].lower()}).")


@owner_cli.command("create")
@click.argument("email")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def owner_create(email: str, password_stdin: bool) -> None:
    """Create an owner (the same as `users create EMAIL --role owner`)."""
    _create(email, _password(password_stdin), roles.OWNER)


@users_cli.command("create")
@click.argument("email")
@click.option("--role", type=click.Choice(roles.ROLES), required=True,
              help="What they may do: " + "; ".join(f"{r}: {roles.DESCRIPTIONS[r]}"
                                                    for r in roles.ROLES))
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def users_create(email: str, role: str, password_stdin: bool) -> None:
    """Create a person who signs in with ROLE (no invitation email needed)."""
    _create(email, _password(password_stdin), role)


@users_cli.command("list")
def users_list() -> None:
    """List everyone who signs in: address, role, two-factor, name."""
    for person in people.everyone(db.session):
        two = "two-factor" if person.two_factor else "password only"
        click.echo(f"{person.id}\t{person.email}\t{person.role}\t{two}\t{person.name}")


def _person(email: str):
    person = people.by_email(db.session, email)
    if person is None:
        raise click.ClickException(f"Nobody signs in as {email.strip()!r}; nothing was changed.")
    return person


@users_cli.command("set-role")
@click.argument("email")
@click.argument("role", type=click.Choice(roles.ROLES))
def users_set_role(email: str, role: str) -> None:
    """Give a person another role (never the last owner's away)."""
    person = _person(email)
    try:
        before, after = people.change_role(db.session, person.id, role, commit=False)
        if before != after:
            audit.record(db.session, "person.role", object_type="person", object_id=person.id,
                         summary=f"changed the role of {email.strip().lower()} from {before} "
                                 f"to {after}",
                         details={"before": before, "after": after}, actor=actors.COMMAND_LINE)
        db.session.commit()
    except DomainError as exc:
        db.session.rollback()
        raise click.ClickException(f"{exc.message} Nothing was changed.") from None
    click.echo(f"{email.strip().lower()} is now {roles.LABELS[after].lower()}"
               + ("." if before != after else " (unchanged)."))


@users_cli.command("remove")
@click.argument("email")
def users_remove(email: str) -> None:
    """Remove a person: their sessions and API tokens stop working (never the last owner)."""
    person = _person(email)
    person_id, role = person.id, person.role
    try:
        address = people.remove(db.session, person_id, commit=False)
        audit.record(db.session, "person.remove", object_type="person", object_id=person_id,
                     summary=f"removed {address} ({role})",
                     details={"email": address, "role": role}, actor=actors.COMMAND_LINE)
        db.session.commit()
    except DomainError as exc:
        db.session.rollback()
        raise click.ClickException(f"{exc.message} Nothing was changed.") from None
    click.echo(f"Removed {address}: their sessions and API tokens no longer work.")


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
@click.option("--user", "user_email", help="Whose token it is: it carries at most their role "
              "(default: the first owner).")
@click.option("--owner", "owner_email", hidden=True)  # the old name of --user, for old scripts
@click.option("--read-only", is_flag=True, help="The token may only read (GET requests).")
def tokens_create(name: str, user_email: str | None, owner_email: str | None,
                  read_only: bool) -> None:
    """Create an API token, full or read-only; the token itself is the last line printed."""
    email = user_email or owner_email
    person = account_lookups.find_owner(db.session, email)
    if person is None:
        raise click.ClickException(f"Nobody signs in as {email!r}." if email else
                                   "Nobody signs in yet: create someone with "
                                   "`flask --app webapp users create`.")
    try:
        token, plain = accounts.create_token(db.session, person.id, name, read_only=read_only,
                                             commit=False)
    except DomainError as exc:
        raise click.ClickException(exc.message) from None
    access = "read-only" if token.read_only else f"full ({person.role})"
    audit.record(db.session, "token.create", object_type="token", object_id=token.id,
                 summary=f"created the token {token.name!r} of {person.email} ({access})",
                 details={"read_only": token.read_only}, actor=actors.COMMAND_LINE)
    db.session.commit()
    click.echo(f"Token {token.name!r} (id {token.id}, {access}) for {person.email}. "
               "It is shown only once:")
    click.echo(plain)


@tokens_cli.command("list")
def tokens_list() -> None:
    """List tokens with whose each is and what it may do (never their values)."""
    for shown in account_lookups.tokens_by_id(db.session):
        token = shown.token
        state = "revoked" if token.revoked_at else "active"
        click.echo(f"{token.id}\t{token.name}\t{token.prefix}…\t{shown.email}\t"
                   f"{shown.access}\t{state}")


@tokens_cli.command("revoke")
@click.argument("token_id", type=int)
def tokens_revoke(token_id: int) -> None:
    try:
        accounts.revoke_token(db.session, token_id, commit=False)
        audit.record(db.session, "token.revoke", object_type="token", object_id=token_id,
                     summary=f"revoked the token {token_id}", actor=actors.COMMAND_LINE)
        db.session.commit()
    except DomainError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"Token {token_id} revoked.")


@users_cli.command("reset-two-factor")
@click.argument("email")
def users_reset_two_factor(email: str) -> None:
    """Turn off a person's two-factor sign-in and void their recovery codes (a lost phone):
    they sign in with their password and set it up again."""
    person = accounts.owner_by_email(db.session, email)
    if person is None:
        raise click.ClickException(f"Nobody signs in as {email.strip()!r}; nothing was changed.")
    had = two_factor.is_enabled(person)
    two_factor.reset(db.session, person.id)
    audit.record(db.session, "person.two_factor_reset", object_type="person",
                 object_id=person.id, summary=f"Two-factor sign-in reset for {person.email}",
                 actor=actors.COMMAND_LINE)
    db.session.commit()
    if had:
        click.echo(f"Two-factor sign-in is off for {person.email} and their recovery codes "
                   "no longer work. They sign in with their password"
                   + (", and are asked to set it up again at once." if
                      sign_in_policy.requires_two_factor(db.session) else "."))
    else:
        click.echo(f"{person.email} had no two-factor sign-in; nothing else changed "
                   "(an unfinished setup, if any, was forgotten).")


def register_cli(app: Flask) -> None:
    app.cli.add_command(owner_cli)
    app.cli.add_command(tokens_cli)
    app.cli.add_command(users_cli)
    register_backup_commands(app)

    # `flask --app webapp worker` comes from the `jobs` package itself, through pyproject's
    # `flask.commands` entry point: the web side never imports the worker.

    @app.cli.command("doctor")
    def doctor_command() -> None:
        """Check configuration, database, Redis, worker, SMTP and BASE_URL; exit 0 only if all pass."""
        sys.exit(report(app, echo=click.echo))
