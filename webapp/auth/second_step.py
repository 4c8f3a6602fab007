"""The second step of signing in: a code from the person's app (or a recovery code) after a
right password; and, where the owner requires two-factor sign-in, the enrolment of a person
who has none, before any other page.

Both pages are public (nobody is signed in yet) and answer only a browser holding a valid
pending sign-in (webapp/auth/pending.py: a right password, under five minutes old, the
password unchanged since); anything else is sent back to the password. Every code tried
counts in the sign-in throttle (webapp/auth/views.py's buckets: too many is the same 429 with
the same words), and `sign_in` runs only once the code is accepted
(broadside.core.two_factor: each code once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from flask import flash, redirect, render_template, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from markupsafe import Markup
from wtforms import StringField
from wtforms.validators import DataRequired, Length

from broadside.core import two_factor
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l, ngettext
from broadside.core.models import Owner
from webapp.audit.words import N_
from webapp.audit_trail import note
from webapp.auth import pending
from webapp.auth.views import TOO_MANY, attempt_allowed, bp, forgive
from webapp.extensions import db
from webapp.forms import keep_for_one_read, place_error
from webapp.security import public, sign_in

T = TypeVar("T")

REASON = ("the second step of a sign-in: it answers only a browser whose pending sign-in (a "
          "right password, under five minutes old) names a person; any other is sent back to "
          "the password")


class CodeForm(FlaskForm):
    code = StringField(_l("Code"), validators=[DataRequired(_l("Type the code.")),
                                           Length(max=two_factor.MAX_CODE_INPUT)],
                       render_kw={"autocomplete": "one-time-code", "autocapitalize": "none",
                                  "spellcheck": "false"})


def _pending(enrol: bool) -> tuple[Owner, pending.Pending] | None:
    state = pending.read()
    if state is None or state.enrol != enrol:
        return None
    person = two_factor.pending_person(db.session, state.person_id, state.epoch)
    if person is None or two_factor.is_enabled(person) == enrol:
        return None
    return person, state


def _start_again():
    if current_user.is_authenticated:
        return redirect(url_for("dashboard.home"))
    pending.clear()
    flash(_("Sign in again: the second step waits five minutes after your password."), "info")
    return redirect(url_for("auth.login"))


@bp.route("/login/two-factor", methods=["GET", "POST"], endpoint="two_factor")
@public(REASON)
def second_step():
    found = _pending(enrol=False)
    if found is None:
        return _start_again()
    person, state = found
    form = CodeForm()
    used, status = _checked(person, form,
                            lambda code: two_factor.accept(db.session, person.id, code))
    if used is not None:
        _signed_in(person)
        if used == "recovery":
            left = two_factor.recovery_codes_left(db.session, person.id)
            flash(ngettext("You signed in with a recovery code; %(num)s of them is left. If you "
                           "lost your phone, set two-factor up again in Settings → Security.",
                           "You signed in with a recovery code; %(num)s of them are left. If you "
                           "lost your phone, set two-factor up again in Settings → Security.",
                           left), "warning")
        return redirect(state.next_url)
    return render_template("auth/two_factor.html", form=form), status


@bp.route("/login/two-factor/enrol", methods=["GET", "POST"], endpoint="enrol_two_factor")
@public(REASON + "; where the owner requires two-factor sign-in, the person enrols here")
def enrol_at_sign_in():
    found = _pending(enrol=True)
    secret = found and two_factor.pending_secret(db.session, found[0].id)
    if found is None or secret is None:
        return _start_again()
    person, state = found
    form = CodeForm()
    codes, status = _checked(person, form, lambda code: two_factor.confirm_enrolment(
        db.session, person.id, code, keep_token=None))
    if codes is not None:
        note(summary=N_("Two-factor sign-in turned on (at sign-in, as required)"))
        _signed_in(person)
        keep_for_one_read("recovery_codes", "\n".join(codes))
        keep_for_one_read("recovery_next", state.next_url)
        return redirect(url_for("security.recovery_codes"))
    shown = two_factor.enrolment(secret, person.email)
    return render_template("auth/enrol_two_factor.html", form=form, enrolment=shown,
                           qr=Markup(shown.qr_svg), email=person.email), status


def _checked(person: Owner, form: CodeForm, accept: Callable[[str], T]) -> tuple[T | None, int]:
    """The submitted code put to `accept` within the sign-in throttle: (what it returned,
    200); or (None, the answer's status), the refusal's words on the form."""
    if not form.validate_on_submit():
        return None, 422 if form.errors else 200
    if not attempt_allowed(person.email):
        form.form_errors.append(str(TOO_MANY))
        return None, 429
    try:
        return accept(form.code.data), 200
    except DomainError as exc:
        db.session.rollback()
        place_error(form, exc)
        return None, exc.status_code


def _signed_in(person: Owner) -> None:
    pending.clear()
    forgive(person.email)
    sign_in(person)
