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
    code = StringField("Code from your app", validators=[
        DataRequired("Type the 6-digit code your app shows."),
        Length(max=two_factor.MAX_CODE_INPUT)], render_kw=_CODE)


class TurnOffForm(FlaskForm):
    code = StringField("A current code from your app", validators=[
        Optional(), Length(max=two_factor.MAX_CODE_INPUT)], render_kw=_CODE)
    password = PasswordField("Or your password", validators=[
        Optional(), Length(max=accounts.MAX_PASSWORD_LENGTH)],
        render_kw={"autocomplete": "current-password"})


class PasswordForm(FlaskForm):
    current_password = PasswordField("Current password", validators=[
        DataRequired("Type your current password."), Length(max=accounts.MAX_PASSWORD_LENGTH)],
        render_kw={"autocomplete": "current-password"})
    password = PasswordField("New password", validators=[
        DataRequired("Type the new password."),
        Length(min=accounts.MIN_PASSWORD_LENGTH, max=accounts.MAX_PASSWORD_LENGTH,
               message=f"The password must be {accounts.MIN_PASSWORD_LENGTH} to "
                       f"{accounts.MAX_PASSWORD_LENGTH} characters long.")],
        render_kw={"autocomplete": "new-password"})
    confirm = PasswordField("Repeat the new password", validators=[
        DataRequired("Type the new password again."),
        EqualTo("password", "The passwords differ.")],
        render_kw={"autocomplete": "new-password"})


class PolicyForm(FlaskForm):
    require_two_factor = BooleanField("Require two-factor sign-in for everyone", description=(
        "People without it are sent to set it up right after their password, before any "
        "other page; their sessions end now."))
    idle_hours = StringField("End a session unused for … hours", render_kw={
        "inputmode": "numeric", "pattern": "[0-9]*"}, description=(
        f"From {MIN_IDLE_HOURS} hour to {MAX_IDLE_HOURS} hours (90 days); 744 is 31 days."))
