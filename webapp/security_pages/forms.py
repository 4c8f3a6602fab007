"""The forms of Settings -> Security."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import BooleanField, PasswordField, SelectField, StringField
from wtforms.validators import DataRequired, EqualTo, Length, Optional

from broadside.core import accounts, two_factor
from broadside.core.i18n import _l
from broadside.core.sign_in_policy import MAX_IDLE_HOURS, MIN_IDLE_HOURS

_CODE = {"autocomplete": "one-time-code", "autocapitalize": "none", "spellcheck": "false"}


class ActionForm(FlaskForm):
    """A button's form: its CSRF token only."""


class LanguageForm(FlaskForm):
    """One's own language; the choices are set per request (security_pages.views), and any
    value reaches the domain, which refuses what it does not ship."""
    locale = SelectField(_l("Language of these pages"), validate_choice=False)


class ConfirmForm(FlaskForm):
    code = StringField(_l("Code from your app"), validators=[
        DataRequired(_l("Type the 6-digit code your app shows.")),
        Length(max=two_factor.MAX_CODE_INPUT)], render_kw=_CODE)


class TurnOffForm(FlaskForm):
    code = StringField(_l("A current code from your app"), validators=[
        Optional(), Length(max=two_factor.MAX_CODE_INPUT)], render_kw=_CODE)
    password = PasswordField(_l("Or your password"), validators=[
        Optional(), Length(max=accounts.MAX_PASSWORD_LENGTH)],
        render_kw={"autocomplete": "current-password"})


class PasswordForm(FlaskForm):
    current_password = PasswordField(_l("Current password"), validators=[
        DataRequired(_l("Type your current password.")), Length(max=accounts.MAX_PASSWORD_LENGTH)],
        render_kw={"autocomplete": "current-password"})
    password = PasswordField(_l("New password"), validators=[
        DataRequired(_l("Type the new password.")),
        Length(min=accounts.MIN_PASSWORD_LENGTH, max=accounts.MAX_PASSWORD_LENGTH,
               message=_l("The password must be %(least)s to %(most)s characters long.",
                          least=accounts.MIN_PASSWORD_LENGTH, most=accounts.MAX_PASSWORD_LENGTH))],
        render_kw={"autocomplete": "new-password"})
    confirm = PasswordField(_l("Repeat the new password"), validators=[
        DataRequired(_l("Type the new password again.")),
        EqualTo("password", _l("The passwords differ."))],
        render_kw={"autocomplete": "new-password"})


class PolicyForm(FlaskForm):
    require_two_factor = BooleanField(_l("Require two-factor sign-in for everyone"), description=_l(
        "People without it are sent to set it up right after their password, before any "
        "other page; their sessions end now."))
    idle_hours = StringField(_l("End a session unused for … hours"), render_kw={
        "inputmode": "numeric", "pattern": "[0-9]*"}, description=_l(
        "From %(least)s hour to %(most)s hours (90 days); 744 is 31 days.",
        least=MIN_IDLE_HOURS, most=MAX_IDLE_HOURS))
