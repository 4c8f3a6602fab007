"""Settings -> Security, the owner's section (permission `people`): require two-factor
sign-in for everyone, and how long a session may sit unused (broadside.core.sign_in_policy)."""

from __future__ import annotations

from flask import flash, url_for
from flask_login import current_user

from broadside.core import roles, sign_in_policy
from broadside.core.errors import DomainError
from broadside.core.i18n import _
from webapp.audit_trail import note
from webapp.extensions import db
from webapp.forms import after_post, place_error
from webapp.permissions import allow
from webapp.security_pages import bp
from webapp.security_pages.forms import PolicyForm
from webapp.security_pages.views import render_index


@bp.route("/policy", methods=["POST"])
@allow(roles.PEOPLE)
def update_policy():
    form = PolicyForm()
    if not form.validate_on_submit():
        return render_index(422, policy_form=form)
    before = sign_in_policy.current(db.session)
    try:
        settings = sign_in_policy.update(db.session, require_two_factor=form.require_two_factor.data,
                                         idle_hours=form.idle_hours.data,
                                         by_person_id=current_user.id)
    except DomainError as exc:
        db.session.rollback()
        place_error(form, exc)
        return render_index(422, policy_form=form)
    note(before={"require_two_factor": before[0], "session_idle_hours": before[1]},
         after={"require_two_factor": settings.require_two_factor,
                "session_idle_hours": settings.session_idle_hours})
    flash(_("The sign-in policy is saved."), "success")
    return after_post(url_for("security.index") + "#policy")
