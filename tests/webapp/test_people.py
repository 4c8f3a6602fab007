"""Settings -> People and the invitation's page, on both databases: an invitation goes out
through the transactional stream (the real worker, the real SMTP server), its link works
once, and an expired, withdrawn or used one is refused; roles change, people are removed and
their session and token stop at once; the last owner stays."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import func, select, update

from broadside.core import accounts, invitations, people
from broadside.core.models import ApiToken, Invitation, Owner, OwnerSession, RecoveryCode
from broadside.mail import invitation as invitation_mail
from tests.helpers import csrf_token_from
from webapp.extensions import db

NEW_PASSWORD = "a brand new passphrase"


def get(client, path: str, **kwargs):
    with client.application.app_context():
        return client.get(path, **kwargs)


def post(client, path: str, data: dict | None = None, *, token_from: str = "/settings/",
         **kwargs):
    """A form POST with a CSRF token of this client's own session."""
    token = csrf_token_from(get(client, token_from).text)
    with client.application.app_context():
        return client.post(path, data={**(data or {}), "csrf_token": token}, **kwargs)


def link_path(app, text: str) -> str:
    base = re.escape(app.config["BASE_URL"].rstrip("/"))
    return re.search(base + r"(/invitation/\S+)", text).group(1)


def accept(client, path: str, name: str = "Bo Writer", password: str = NEW_PASSWORD,
           confirm: str | None = None):
    token = csrf_token_from(get(client, "/login").text)  # (an invitee is signed in nowhere)
    with client.application.app_context():
        return client.post(path, data={"name": name, "password": password,
                                       "confirm": confirm or password, "csrf_token": token})


def count(model) -> int:
    db.session.expire_all()
    return db.session.scalar(select(func.count()).select_from(model))


def test_an_invitation_goes_out_and_its_link_works_once(app, logged_in_client, owner,
                                                        smtp_server, run_worker_burst):
    page = get(logged_in_client, "/settings/people/")
    assert page.status_code == 200 and "Invite someone" in page.text
    assert "Drafts, segments and automations" in page.text  # each role's description
    response = post(logged_in_client, "/settings/people/invite",
                    {"email": " Bo@Example.com ", "role": "writer"})
    assert response.status_code == 303, response.text
    page = get(logged_in_client, "/settings/people/")
    assert "Invitation sent to bo@example.com as writer" in page.text
    assert "bo@example.com" in page.text.split('id="invitations"')[1]
    stored = db.session.scalar(select(Invitation))
    assert (stored.email, stored.role, stored.invited_by) == ("bo@example.com", "writer", owner.id)
    assert stored.expires_at - stored.created_at == timedelta(hours=72)

    run_worker_burst()  # the transactional stream, to the real SMTP server
    [received] = smtp_server.messages
    assert received.rcpt_tos == ["bo@example.com"]
    email = received.message
    assert email["Subject"] == invitation_mail.SUBJECT
    assert email["X-Broadside-Kind"] == invitation_mail.KIND
    text = email.get_body(("plain",)).get_content()
    assert "works once, for 72 hours" in text and "as writer" in text
    path = link_path(app, text)
    token = path.rsplit("/", 1)[1]
    assert stored.token_hash == invitations._hash(token) and token not in stored.token_hash

    invitee = app.test_client()
    opened = get(invitee, path)
    assert opened.status_code == 200 and "bo@example.com" in opened.text and "Join" in opened.text
    assert count(Owner) == 1  # opening the link changes nothing
    mistaken = accept(invitee, path, confirm=NEW_PASSWORD + "?")
    assert mistaken.status_code == 422 and "The passwords differ." in mistaken.text
    short = accept(invitee, path, password="short")
    assert short.status_code == 422 and "10 to 200 characters" in short.text
    assert count(Owner) == 1
    done = accept(invitee, path)
    assert (done.status_code, done.headers["Location"]) == (302, "/")
    home = get(invitee, "/")
    assert home.status_code == 200 and "Welcome to Broadside, Bo Writer" in home.text
    bo = people.by_email(db.session, "bo@example.com")
    assert (bo.role, bo.name) == ("writer", "Bo Writer")
    assert accounts.authenticate(db.session, "bo@example.com", NEW_PASSWORD) is not None

    again = app.test_client()
    for used in (get(again, path), accept(again, path, name="Mallory")):
        assert used.status_code == 410 and "already used" in used.text
    assert count(Owner) == 2
    assert "bo@example.com" not in get(logged_in_client, "/settings/people/").text.split(
        'id="invitations"')[1]


def _invite(session, email: str, role: str = "viewer", inviter: Owner | None = None):
    return invitations.invite(session, email, role, inviter_id=inviter.id if inviter else None,
                              inviter_role=None)


def test_expired_withdrawn_replaced_and_unknown_links_are_refused(app, client, owner):
    expired, expired_token = _invite(db.session, "old@example.com")
    db.session.execute(update(Invitation).where(Invitation.id == expired.id)
                       .values(expires_at=expired.created_at - timedelta(seconds=1)))
    db.session.commit()
    page = get(client, f"/invitation/{expired_token}")
    assert page.status_code == 410 and "has expired" in page.text

    withdrawn, withdrawn_token = _invite(db.session, "gone@example.com")
    invitations.revoke(db.session, withdrawn.id)
    assert get(client, f"/invitation/{withdrawn_token}").status_code == 410

    first, first_token = _invite(db.session, "twice@example.com", "viewer")
    _, second_token = _invite(db.session, "twice@example.com", "sender")  # replaces the first
    replaced = accept(client, f"/invitation/{first_token}")
    assert replaced.status_code == 410 and "withdrawn or replaced" in replaced.text
    assert accept(app.test_client(), f"/invitation/{second_token}").status_code == 302
    assert people.by_email(db.session, "twice@example.com").role == "sender"

    unknown = get(client, "/invitation/not-a-real-link")
    assert unknown.status_code == 404 and "not valid" in unknown.text
    assert count(Owner) == 2


def test_acceptance_attempts_are_throttled_per_client(app, client, owner):
    app.config["INVITATION_ATTEMPTS_PER_CLIENT"] = 3
    _, token = _invite(db.session, "real@example.com")
    for _ in range(5):  # a real link is never counted
        assert get(client, f"/invitation/{token}").status_code == 200
    for n in range(3):
        assert get(client, f"/invitation/guess{n}").status_code == 404
    assert get(client, "/invitation/guess4").status_code == 429
    assert get(client, f"/invitation/{token}").status_code == 429  # this client waits now
    other = get(client, f"/invitation/{token}", environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert other.status_code == 200


def test_inviting_a_person_who_signs_in_is_refused_under_the_field(logged_in_client, owner,
                                                                   make_person):
    make_person("viewer", "vi@example.com")
    taken = post(logged_in_client, "/settings/people/invite",
                 {"email": "VI@example.com", "role": "admin"})
    assert taken.status_code == 409 and "already signs in" in taken.text
    assert 'id="email-error"' in taken.text
    bad = post(logged_in_client, "/settings/people/invite", {"email": "nope", "role": "admin"})
    assert bad.status_code == 422 and 'id="email-error"' in bad.text
    no_role = post(logged_in_client, "/settings/people/invite",
                   {"email": "x@example.com", "role": "emperor"})
    assert no_role.status_code == 422 and 'id="role-error"' in no_role.text
    assert count(Invitation) == 0


def test_roles_change_and_the_last_owner_stays(app, logged_in_client, owner, make_person):
    writer = make_person("writer", "wr@example.com")
    response = post(logged_in_client, f"/settings/people/{writer.id}/role", {"role": "sender"})
    assert response.status_code == 303
    assert "is now sender (was writer)" in get(logged_in_client, "/settings/people/").text
    db.session.expire_all()
    assert db.session.get(Owner, writer.id).role == "sender"

    alone = post(logged_in_client, f"/settings/people/{owner.id}/role", {"role": "admin"})
    assert alone.status_code == 409 and "last owner" in alone.text
    confirm = get(logged_in_client, f"/settings/people/{owner.id}/remove")
    assert confirm.status_code == 200 and 'id="last-owner"' in confirm.text
    assert "<button" not in confirm.text.split('id="last-owner"')[1]
    removed = post(logged_in_client, f"/settings/people/{owner.id}/remove")
    assert removed.status_code == 409
    db.session.expire_all()
    assert db.session.get(Owner, owner.id).role == "owner"
    assert people.owners_count(db.session) == 1


def test_a_removed_persons_session_and_token_stop_on_the_next_request(
        app, logged_in_client, sign_in_as):
    with app.app_context():  # its own `g`: the owner's sign-in is cached in the test's
        writer = sign_in_as("writer", "leaving@example.com")
    person_id = writer.person.id
    _, plain = accounts.create_token(db.session, person_id, "theirs")
    db.session.add(RecoveryCode(owner_id=person_id, code_hash="x" * 64))
    db.session.commit()
    headers = {"Authorization": f"Bearer {plain}"}
    assert get(writer, "/").status_code == 200
    assert get(writer, "/api/lists", headers=headers).status_code == 200

    confirm = get(logged_in_client, f"/settings/people/{person_id}/remove")
    assert confirm.status_code == 200 and "API tokens stop working" in confirm.text
    assert post(logged_in_client, f"/settings/people/{person_id}/remove").status_code == 303

    assert get(writer, "/").status_code == 302  # to the sign-in page
    assert get(writer, "/api/lists", headers=headers).status_code == 401
    for model in (OwnerSession, ApiToken, RecoveryCode):  # the cascades (SQLite's too)
        assert db.session.scalar(select(func.count()).select_from(model)
                                 .where(model.owner_id == person_id)) == 0


def test_an_owner_may_leave_while_another_owner_stays(app, logged_in_client, owner, make_person):
    make_person("owner", "second@example.com")
    response = post(logged_in_client, f"/settings/people/{owner.id}/remove")
    assert (response.status_code, response.headers["Location"]) == (303, "/login")
    assert get(logged_in_client, "/").status_code == 302
    assert [p.email for p in people.everyone(db.session)] == ["second@example.com"]


def test_an_owner_resets_someones_two_factor(app, logged_in_client, make_person):
    person = make_person("writer", "lost@example.com")
    db.session.execute(update(Owner).where(Owner.id == person.id).values(
        totp_secret="JBSWY3DPEHPK3PXP", totp_enabled_at=person.created_at))
    db.session.add(RecoveryCode(owner_id=person.id, code_hash="y" * 64))
    db.session.commit()
    page = get(logged_in_client, "/settings/people/")
    assert "Reset two-factor" in page.text
    response = post(logged_in_client, f"/settings/people/{person.id}/two-factor/reset")
    assert response.status_code == 303
    db.session.expire_all()
    reset = db.session.get(Owner, person.id)
    assert (reset.totp_secret, reset.totp_enabled_at) == (None, None)
    assert count(RecoveryCode) == 0


def test_people_is_for_owners_only(app, sign_in_as, make_person):
    target = make_person("viewer", "target@example.com")
    for role in ("admin", "sender", "writer", "viewer"):
        with app.app_context():
            browser = sign_in_as(role, f"{role}-p@example.com")
        assert get(browser, "/settings/people/").status_code == 403
        assert 'id="people-link"' not in get(browser, "/settings/").text
        refused = post(browser, f"/settings/people/{target.id}/remove")
        assert refused.status_code == 403
    assert people.by_email(db.session, "target@example.com") is not None


def test_everyone_makes_and_revokes_their_own_tokens_and_managers_any(app, sign_in_as):
    with app.app_context():
        writer = sign_in_as("writer", "w-tok@example.com")
    made = post(writer, "/settings/tokens", {"name": "mine", "access": "full"})
    assert made.status_code == 303
    page = get(writer, "/settings/")
    assert "full (writer)" in page.text and "yours" in page.text
    with app.app_context():
        admin = sign_in_as("admin", "a-tok@example.com")
    _, plain = accounts.create_token(db.session, admin.person.id, "admin-reports", read_only=True)
    assert "admin-reports" not in get(writer, "/settings/").text  # only one's own
    admins = db.session.scalar(select(ApiToken).where(ApiToken.name == "admin-reports"))
    refused = post(writer, f"/settings/tokens/{admins.id}/revoke")
    assert refused.status_code == 403
    db.session.expire_all()
    assert db.session.get(ApiToken, admins.id).revoked_at is None

    seen = get(admin, "/settings/").text
    assert "w-tok@example.com" in seen and "read-only" in seen
    mine = db.session.scalar(select(ApiToken).where(ApiToken.name == "mine"))
    assert post(admin, f"/settings/tokens/{mine.id}/revoke").status_code == 302
    db.session.expire_all()
    assert db.session.get(ApiToken, mine.id).revoked_at is not None
