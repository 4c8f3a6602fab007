"""`flask --app webapp users ...` and `tokens ...` for self-hosters, through Flask's CLI runner,
on both databases: people created with a role (password from stdin or asked twice), listed,
given another role and removed, never the last owner; tokens belong to a person (`--user`,
`--owner` still works) and the list says whose; every change has its audit row."""

from __future__ import annotations

from sqlalchemy import select

from broadside.core import accounts, people
from broadside.core.models import ApiToken, AuditEntry
from webapp.extensions import db

PASSWORD = "a long enough password"


def run(app, *args: str, stdin: str = ""):
    return app.test_cli_runner().invoke(args=list(args), input=stdin)


def audit_actions() -> list[tuple[str, str, str | None]]:
    db.session.expire_all()
    return [(e.action, e.actor, e.object_type) for e in
            db.session.scalars(select(AuditEntry).order_by(AuditEntry.id))]


def test_users_create_list_set_role_and_remove(app, client):
    made = run(app, "users", "create", "Ana@Example.com", "--role", "writer", "--password-stdin",
               stdin=PASSWORD + "\n")
    assert made.exit_code == 0, made.output
    assert "Created ana@example.com (writer)" in made.output
    assert accounts.authenticate(db.session, "ana@example.com", PASSWORD).role == "writer"
    asked = run(app, "users", "create", "bo@example.com", "--role", "owner",
                stdin=f"{PASSWORD}\n{PASSWORD}\n")  # asked, then asked again
    assert asked.exit_code == 0, asked.output
    shortcut = run(app, "owner", "create", "cy@example.com", "--password-stdin",
                   stdin=PASSWORD + "\n")
    assert shortcut.exit_code == 0 and people.by_email(db.session, "cy@example.com").role == "owner"

    listed = run(app, "users", "list").output
    assert "ana@example.com\twriter\tpassword only" in listed and "bo@example.com\towner" in listed

    assert run(app, "users", "set-role", "ana@example.com", "sender").exit_code == 0
    assert people.by_email(db.session, "ana@example.com").role == "sender"
    bad = run(app, "users", "set-role", "ana@example.com", "emperor")
    assert bad.exit_code != 0 and "emperor" in bad.output
    nobody = run(app, "users", "remove", "nobody@example.com")
    assert nobody.exit_code != 0 and "Nobody signs in as" in nobody.output

    assert run(app, "users", "remove", "cy@example.com").exit_code == 0
    last = run(app, "users", "set-role", "bo@example.com", "admin")  # bo is the last owner now
    assert last.exit_code == 1 and "last owner" in last.output and "Nothing was changed" in last.output
    assert run(app, "users", "remove", "bo@example.com").exit_code == 1
    assert people.by_email(db.session, "bo@example.com").role == "owner"
    assert audit_actions() == [("person.create", "command line", "person")] * 3 + [
        ("person.role", "command line", "person"), ("person.remove", "command line", "person")]


def test_the_last_owner_is_never_demoted_or_removed(app, owner):
    demote = run(app, "users", "set-role", owner.email, "admin")
    assert demote.exit_code == 1 and "last owner" in demote.output
    remove = run(app, "users", "remove", owner.email)
    assert remove.exit_code == 1 and "last owner" in remove.output
    db.session.expire_all()
    assert people.by_email(db.session, owner.email).role == "owner"
    assert [a for a, _, _ in audit_actions()] == []  # nothing changed, nothing recorded


def test_refusals_create_nobody(app, owner):
    short = run(app, "users", "create", "a@example.com", "--role", "viewer", "--password-stdin",
                stdin="short\n")
    assert short.exit_code == 1 and "at least 10 characters" in short.output
    taken = run(app, "users", "create", owner.email, "--role", "viewer", "--password-stdin",
                stdin=PASSWORD + "\n")
    assert taken.exit_code == 1 and "already signs in" in taken.output
    no_role = run(app, "users", "create", "b@example.com", "--password-stdin",
                  stdin=PASSWORD + "\n")
    assert no_role.exit_code == 2 and "--role" in no_role.output
    assert [p.email for p in people.everyone(db.session)] == [owner.email]


def test_tokens_belong_to_a_person_and_the_list_says_whose(app, client, owner, make_person):
    make_person("writer", "wr@example.com")
    made = run(app, "tokens", "create", "ci", "--user", "wr@example.com", "--read-only")
    assert made.exit_code == 0, made.output
    assert "read-only" in made.output and "wr@example.com" in made.output
    plain = made.output.strip().splitlines()[-1]
    headers = {"Authorization": f"Bearer {plain}"}
    assert client.get("/api/lists", headers=headers).status_code == 200
    old = run(app, "tokens", "create", "deploy", "--owner", owner.email)  # the old option
    assert old.exit_code == 0 and "full (owner)" in old.output
    default = run(app, "tokens", "create", "first")  # the first owner's, as before
    assert default.exit_code == 0 and owner.email in default.output
    nobody = run(app, "tokens", "create", "x", "--user", "ghost@example.com")
    assert nobody.exit_code == 1 and "Nobody signs in as" in nobody.output

    listed = run(app, "tokens", "list").output
    assert "\tci\t" in listed and "wr@example.com\tread-only\tactive" in listed
    assert f"{owner.email}\tfull (owner)\tactive" in listed and plain not in listed

    assert run(app, "users", "remove", "wr@example.com").exit_code == 0
    assert client.get("/api/lists", headers=headers).status_code == 401  # the cascade
    assert db.session.scalar(select(ApiToken).where(ApiToken.name == "ci")) is None
    assert [(a, who) for a, who, _ in audit_actions()] == [
        ("token.create", "command line"), ("token.create", "command line"),
        ("token.create", "command line"), ("person.remove", "command line")]
