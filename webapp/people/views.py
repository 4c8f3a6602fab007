"""Settings -> People (`/settings/people/`, owners only: the `people` permission): the people
with their role, two-factor sign-in and last use, the open invitations (revoke, send again),
the invite form, a role's change, a person's removal (after a confirmation page) and an
owner's reset of someone's two-factor sign-in.

The last owner can be neither demoted nor removed (broadside.core.people: one guarded
statement). A person may remove themselves or give up their own ownership while another
owner remains: they are then signed out, or lose this page, at once.
"""

from __future__ import annotations

from flask import flash, render_template, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import EmailField, RadioField, SelectField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length

from broadside.core import invitations, people, roles
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l, current_locale, language_of
from webapp import audit_trail
from webapp.extensions import db
from webapp.forms import after_post, place_error
from webapp.people import bp, mailing
from webapp.security import sign_out


def role_word(role: str) -> str:
    """A role named inside a sentence: lower case but in German, whose nouns are capitalised."""
    label = str(roles.LABELS[role])
    return label if language_of(current_locale()) == "de" else label.lower()


ROLE_CHOICES = [SelectChoice(role, roles.LABELS[role]) for role in roles.ROLES]


class InviteForm(FlaskForm):
    email = EmailField(_l("Email address"),
                       validators=[DataRequired(_l("Give the address to invite.")),
                                   Length(max=320)],
                       render_kw={"autocomplete": "off", "spellcheck": "false"})
    role = RadioField(_l("Role"), choices=ROLE_CHOICES, default=roles.WRITER,
                      validators=[DataRequired(_l("Choose a role."))])


class RoleForm(FlaskForm):
    role = SelectField(_l("Role"), choices=ROLE_CHOICES, validate_choice=False)


class EmptyForm(FlaskForm):
    """Only the CSRF token, for buttons that change something."""


def _render(*, invite_form: InviteForm | None = None, error: str | None = None,
            status: int = 200):
    return render_template(
        "people/index.html", people=people.everyone(db.session),
        invitations=invitations.open_ones(db.session),
        invite_form=invite_form or InviteForm(formdata=None),
        role_form=RoleForm(formdata=None), action_form=EmptyForm(),
        descriptions=roles.DESCRIPTIONS, labels=roles.LABELS, error=error,
        role_choices=[(role, roles.LABELS[role]) for role in roles.ROLES]), status


def _back(anchor: str = ""):
    return after_post(url_for("people.index") + anchor)


@bp.route("/settings/people/")
def index():
    return _render()


@bp.route("/settings/people/invite", methods=["POST"])
def invite():
    form = InviteForm()
    if not form.validate_on_submit():
        return _render(invite_form=form, status=422)
    audit_trail.note(summary=f"invited {form.email.data.strip()} as {form.role.data}",
                     email=form.email.data.strip(), role=form.role.data)
    try:
        invitation = mailing.invite(current_user, form.email.data, form.role.data)
    except DomainError as exc:
        db.session.rollback()
        place_error(form, exc)
        return _render(invite_form=form, status=exc.status_code)
    flash(_("Invitation sent to %(email)s as %(role)s. The link works once, for 72 hours.",
            email=invitation.email, role=role_word(invitation.role)), "success")
    return _back("#invitations")


@bp.route("/settings/people/invitations/<int:invitation_id>/resend", methods=["POST"])
def resend_invitation(invitation_id: int):
    if not EmptyForm().validate_on_submit():
        return _render(error="This form has expired. Reload the page and try again.", status=400)
    try:
        invitation = mailing.resend(current_user, invitation_id)
    except DomainError as exc:
        db.session.rollback()
        return _render(error=exc.message, status=exc.status_code)
    audit_trail.note(summary=f"sent the invitation of {invitation.email} again",
                     email=invitation.email, role=invitation.role)
    flash(_("A new link is on its way to %(email)s; the earlier one no longer works.",
            email=invitation.email),
          "success")
    return _back("#invitations")


@bp.route("/settings/people/invitations/<int:invitation_id>/revoke", methods=["POST"])
def revoke_invitation(invitation_id: int):
    if not EmptyForm().validate_on_submit():
        return _render(error="This form has expired. Reload the page and try again.", status=400)
    audit_trail.note(summary="withdrew an invitation", invitation_id=invitation_id)
    try:
        invitation = invitations.revoke(db.session, invitation_id)
    except DomainError as exc:
        return _render(error=exc.message, status=exc.status_code)
    flash(_("The invitation of %(email)s is withdrawn: its link no longer works.",
            email=invitation.email),
          "success")
    return _back("#invitations")


@bp.route("/settings/people/<int:person_id>/role", methods=["POST"])
def change_role(person_id: int):
    form = RoleForm()
    if not form.validate_on_submit():
        return _render(error="This form has expired. Reload the page and try again.", status=400)
    person = people.get(db.session, person_id)
    audit_trail.note(summary=f"changed the role of {person.email} from {person.role} to "
                             f"{form.role.data}", before=person.role, after=form.role.data)
    myself = person_id == current_user.id
    try:
        before, after = people.change_role(db.session, person_id, form.role.data,
                                           giver_role=current_user.role)
    except DomainError as exc:
        return _render(error=exc.message, status=exc.status_code)
    if before == after:
        flash(_("%(email)s already is %(role)s.", email=person.email, role=role_word(after)),
              "info")
    else:
        flash(_("%(email)s is now %(role)s (was %(before)s). It applies to their next page and "
                "API call.", email=person.email, role=role_word(after), before=role_word(before)),
              "success")
    if myself and not roles.may(after, roles.PEOPLE):
        return after_post(url_for("settings.index"))  # this page is no longer theirs
    return _back(f"#person-{person_id}")


@bp.route("/settings/people/<int:person_id>/remove", methods=["GET"])
def confirm_remove(person_id: int):
    person = people.get(db.session, person_id)
    last_owner = person.role == roles.OWNER and people.owners_count(db.session) <= 1
    return render_template("people/remove.html", person=person, last_owner=last_owner,
                           myself=person_id == current_user.id, action_form=EmptyForm(),
                           labels=roles.LABELS)


@bp.route("/settings/people/<int:person_id>/remove", methods=["POST"])
def remove(person_id: int):
    if not EmptyForm().validate_on_submit():
        return _render(error="This form has expired. Reload the page and try again.", status=400)
    person = people.get(db.session, person_id)
    myself = person_id == current_user.id
    audit_trail.note(summary=f"removed {person.email} ({person.role})", email=person.email,
                     role=person.role)
    try:
        email = people.remove(db.session, person_id)
    except DomainError as exc:
        return _render(error=exc.message, status=exc.status_code)
    if myself:
        sign_out()  # their session is gone with them; the cookie goes too
        flash(_("You removed yourself from Broadside and are signed out."), "info")
        return after_post(url_for("auth.login"))
    flash(_("%(email)s is removed: their sessions and API tokens stopped working.", email=email),
          "success")
    return _back()


@bp.route("/settings/people/<int:person_id>/two-factor/reset", methods=["POST"])
def reset_two_factor(person_id: int):
    if not EmptyForm().validate_on_submit():
        return _render(error="This form has expired. Reload the page and try again.", status=400)
    audit_trail.note(summary="reset a person's two-factor sign-in", person_id=person_id)
    try:
        email = people.reset_two_factor(db.session, person_id)
    except DomainError as exc:
        return _render(error=exc.message, status=exc.status_code)
    flash(_("Two-factor sign-in is off for %(email)s: they sign in with their password and can "
            "set it up again.", email=email), "success")
    return _back(f"#person-{person_id}")
