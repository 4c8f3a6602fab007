"""Settings -> Design: the logo, colour, width, font and footer text of every email and public
page, with a live preview; and the owner's words for the double opt-in email and sign-up pages.

- GET  /settings/design                 the page
- POST /settings/design                 save the look (422 with the typed values on a mistake)
- POST /settings/design/logo            upload a logo (checked by its bytes; 422 says why not)
- POST /settings/design/logo/remove     no logo on new emails and the pages
- GET  /settings/design/preview         (HTMX) the preview pane for the values being typed
- GET  /settings/design/preview/email   the sample email itself, for the preview's iframe
- GET  /settings/design/preview/confirmation   the confirmation email in the saved words
- POST /settings/design/texts           save the texts; `reset=<key>` puts one back to default
- GET  /settings/design?texts=<tag>     the texts section edits that language's versions
- POST /settings/design/texts/<tag>     save one language's versions (blank: the default text)
- POST /settings/design/language        the installation's default language for readers

The design is read when an email is frozen (pressing Send, saving an automation, a test send
or a preview of a draft), so one broadcast is one design and a change never alters what was
sent (docs/ARCHITECTURE.md, invariant 8). Saving the look or the logo gives every live
automation new revisions in the same commit (broadside.campaigns.automations.refreeze): their
next messages carry the new design, those sent keep theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from flask import current_app, flash, redirect, render_template, request, url_for
from flask_wtf import FlaskForm
from flask_wtf.file import FileField
from wtforms import SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.widgets import ColorInput

from broadside.campaigns.automations import refreeze
from broadside.core.errors import ValidationError
from broadside.core.i18n import LOCALE_NAMES, LOCALES, _, _l
from broadside.core.models import MailingList, Subscriber
from broadside.core.site_settings import SettingsError, get_settings
from broadside.mail import design, signup_texts
from broadside.mail.rendering import CompiledRevision, freeze_content
from webapp.broadcasts.views import PREVIEW_CSP
from webapp.extensions import db
from webapp.forms import after_post
from webapp.htmx import make_response
from webapp.settings.views import bp


def N_(message: str) -> str:
    return message


# Shown through _() (the owner's language).
SAMPLE_SUBJECT = N_("Our news this week")
SAMPLE_BODY = N_("""# Hello {{ name or "there" }},

This is how your emails look: a heading, a paragraph with [a link](https://example.com),
and a list.

- Your logo sits above the message, your colour on its top edge and on links.
- Your footer text comes before your postal address and the unsubscribe link.

> A quote stands out like this.

Thank you for reading.
""")


class LookForm(FlaskForm):
    colour = StringField(_l("Brand colour"), widget=ColorInput(),
                         description=_l("On the top edge of each email, its links and buttons, "
                                        "and on your sign-up and unsubscribe pages."))
    width = StringField(_l("Email width (pixels)"),
                        render_kw={"type": "number", "min": design.MIN_WIDTH,
                                   "max": design.MAX_WIDTH, "step": 10, "inputmode": "numeric"},
                        description=_l("From %(min)s to %(max)s; 600 suits most readers. Phones "
                                       "always get the full screen width.",
                                       min=design.MIN_WIDTH, max=design.MAX_WIDTH))
    font = SelectField(_l("Font"), choices=[SelectChoice(key, label)
                                            for key, (label, _stack) in design.FONTS.items()],
                       validate_choice=False,
                       description=_l("Fonts every mail client has; web fonts are left out "
                                      "because most clients never load them."))
    footer_text = TextAreaField(_l("Footer text"), render_kw={"rows": 3},
                                description=_l("Plain text, printed in every email above your "
                                               "postal address and the unsubscribe link."))


class LogoForm(FlaskForm):
    logo = FileField(_l("Logo image"), id="logo-file",
                     render_kw={"accept": "image/png,image/jpeg,image/gif,image/webp"},
                     description=_l("PNG, JPEG, GIF or WebP, at most %(kb)s KB and %(side)s "
                                    "pixels a side. Shown up to %(width)s × %(height)s pixels.",
                                    kb=design.MAX_LOGO_BYTES // 1024, side=design.MAX_LOGO_SIDE,
                                    width=design.LOGO_BOX[0], height=design.LOGO_BOX[1]))


class TextsForm(FlaskForm):
    """One field per `signup_texts.TEXTS` entry (added below)."""


class LocalizedForm(FlaskForm):
    """One language's versions: the texts and the footer, blank meaning the default's."""

    footer_text = TextAreaField(_l("Footer text"), render_kw={"rows": 3})


class LanguageForm(FlaskForm):
    default_language = SelectField(
        _l("Readers' language"), validate_choice=False,
        choices=[SelectChoice(tag, name) for tag, name in LOCALE_NAMES.items()],
        description=_l("What the sign-up and unsubscribe pages, the confirmation email and "
                       "the footer of every email are in for readers whose list has no "
                       "language and who chose none."))


for _text in signup_texts.TEXTS:
    _field = StringField if _text.one_line else TextAreaField
    _rows = {} if _text.one_line else {"rows": 6 if _text.key == "optin_body" else 3}
    setattr(TextsForm, _text.key, _field(_l(_text.label), render_kw=_rows))
    setattr(LocalizedForm, _text.key, _field(_l(_text.label), render_kw=_rows))


class EmptyForm(FlaskForm):
    """Only the CSRF token, for buttons that change state."""


def _look_form(saved: design.Design) -> LookForm:
    return LookForm(formdata=None, data={"colour": saved.colour, "width": saved.width,
                                         "font": saved.font, "footer_text": saved.footer_text})


def _texts_form() -> TextsForm:
    return TextsForm(formdata=None, data=signup_texts.current_texts(db.session))


def _look_values(source: Mapping[str, Any]) -> design.DesignInput:
    return design.DesignInput(colour=source.get("colour", ""), width=source.get("width", ""),
                              font=source.get("font", ""),
                              footer_text=source.get("footer_text", ""))


def _texts_language(settings) -> str | None:
    """The language whose versions the texts section edits (`?texts=`), None: the default."""
    asked = (request.view_args or {}).get("tag") or request.args.get("texts")
    default = signup_texts.default_language(settings)
    return asked if asked in LOCALES and asked != default else None


def _localized_form(settings, tag: str) -> LocalizedForm:
    saved = (settings.localized_texts or {}).get(tag) or {}
    return LocalizedForm(formdata=None, data={key: saved.get(key, "")
                                              for key in signup_texts.LOCALIZED_KEYS})


def _placeholders(settings, tag: str) -> dict[str, str]:
    """What a blank version shows readers: the default language's text, else Broadside's
    own words in `tag`."""
    own = settings.signup_texts or {}
    shown = {t.key: own[t.key] if isinstance(own.get(t.key), str)
             else signup_texts.default_words(t.key, tag) for t in signup_texts.TEXTS}
    shown[signup_texts.FOOTER_KEY] = settings.footer_text or ""
    return shown


def _render(*, look_form: LookForm | None = None, logo_form: LogoForm | None = None,
            texts_form: TextsForm | None = None, localized_form: LocalizedForm | None = None,
            language_form: LanguageForm | None = None, status: int = 200):
    saved = design.current_design(db.session)
    settings = get_settings(db.session)
    tag = _texts_language(settings)
    default = signup_texts.default_language(settings)
    look_form = look_form or _look_form(saved)
    values = _look_values({f.name: f.raw_data[0] if f.raw_data else f.data
                           for f in (look_form.colour, look_form.width, look_form.font,
                                     look_form.footer_text)})
    base_url = current_app.config["BASE_URL"]
    return render_template(
        "settings/design.html", look_form=look_form, logo_form=logo_form or LogoForm(),
        texts_form=texts_form or _texts_form(), action_form=EmptyForm(), saved=saved,
        texts_language=tag, default_language=default,
        other_languages=[t for t in LOCALES if t != default],
        localized_form=localized_form or (_localized_form(settings, tag) if tag else None),
        placeholders=_placeholders(settings, tag) if tag else {},
        language_form=language_form or LanguageForm(formdata=None,
                                                    data={"default_language": default}),
        preview=_preview(values), texts=signup_texts.TEXTS,
        stale_logo_url=bool(saved.logo_url and not saved.logo_url.startswith(base_url + "/")),
        automations_reached=refreeze.reaching(db.session, refreeze.DESIGN),
    ), status


def _with_automations(write: Callable[[], object]) -> refreeze.Refrozen:
    """The design saved by `write` (not committing), every live automation following it, in
    one commit."""
    _, refrozen = refreeze.save_and_refreeze(db.session, write, refreeze.DESIGN,
                                             default_from=current_app.config["MAIL_FROM"])
    return refrozen


def _said(first: str, refrozen: refreeze.Refrozen) -> str:
    return " ".join(filter(None, (first, refrozen.words())))


def _preview(values: design.DesignInput) -> dict:
    """The preview pane for typed values: each wrong one is named and left at its saved
    value, so the preview always shows something."""
    saved = design.current_design(db.session)
    shown, problems = {}, []
    for name, clean in (("colour", design.clean_colour), ("width", design.clean_width),
                        ("font", design.clean_font), ("footer_text", design.clean_footer_text)):
        try:
            shown[name] = clean(getattr(values, name))
        except SettingsError as exc:
            problems.append(exc.message)
            shown[name] = getattr(saved, name)
    query = urlencode(shown)
    return {"problems": problems, "src": url_for("settings.design_preview_email") + "?" + query}


@bp.route("/design")
def design_page():
    return _render()


@bp.route("/design", methods=["POST"])
def design_save():
    form = LookForm()
    if not form.validate_on_submit():
        return _render(look_form=form, status=400)
    try:
        refrozen = _with_automations(lambda: design.update_design(
            db.session, _look_values(request.form), base_url=current_app.config["BASE_URL"],
            commit=False))
    except SettingsError as exc:
        getattr(form, exc.field).errors = [exc.message]
        return _render(look_form=form, status=422)
    except ValidationError as exc:  # an automation's step would no longer build: nothing saved
        flash(exc.message, "error")
        return _render(look_form=form, status=422)
    flash(_said(_("Design saved. New emails, test sends and previews use it now; broadcasts "
                  "already sent keep the design they were sent with."), refrozen), "success")
    return after_post(url_for("settings.design_page") + "#look")


@bp.route("/design/logo", methods=["POST"])
def design_logo():
    form = LogoForm()
    if not form.validate_on_submit():
        return _render(logo_form=form, status=400)
    upload = request.files.get("logo")
    data = upload.read() if upload is not None else b""
    try:
        refrozen = _with_automations(lambda: design.store_logo(
            db.session, data, base_url=current_app.config["BASE_URL"], commit=False))
    except SettingsError as exc:
        form.logo.errors = [exc.message]
        return _render(logo_form=form, status=422)
    except ValidationError as exc:
        flash(exc.message, "error")
        return _render(logo_form=form, status=422)
    flash(_said(_("Logo saved. It is on new emails and on your sign-up and unsubscribe pages."),
                refrozen), "success")
    return after_post(url_for("settings.design_page") + "#logo")


@bp.route("/design/logo/remove", methods=["POST"])
def design_logo_remove():
    if EmptyForm().validate_on_submit():
        try:
            refrozen = _with_automations(lambda: design.remove_logo(db.session, commit=False))
        except ValidationError as exc:
            flash(exc.message, "error")
            return redirect(url_for("settings.design_page") + "#logo")
        flash(_said(_("Logo removed from new emails and your pages. Emails already sent still "
                      "show it."), refrozen), "success")
    return redirect(url_for("settings.design_page") + "#logo")


@bp.route("/design/preview")
def design_preview():
    return render_template("settings/_design_preview.html",
                           preview=_preview(_look_values(request.args)))


@bp.route("/design/preview/email")
def design_preview_email():
    """The sample email in the design given by the query (values checked again here)."""
    saved = design.current_design(db.session)
    try:
        shown = design.validate_design(_look_values(request.args), saved)
    except SettingsError:
        shown = saved
    settings = get_settings(db.session)
    logo = url_for("brand.logo", name=saved.logo_file) if saved.logo_file else ""
    look = design.email_design(shown, from_name=settings.sender_name, logo_url=logo)
    frozen = freeze_content(subject=_(SAMPLE_SUBJECT), preheader="",
                            body_markdown=_(SAMPLE_BODY),
                            from_name=settings.sender_name, from_email="",
                            postal_address=settings.postal_address or _("Your postal address"),
                            design=look)
    html = CompiledRevision(subject=_(SAMPLE_SUBJECT), html_template=frozen.html_template,
                            text_template=frozen.text_template).render(
        email="alex@example.com", name="Alex", attributes={}, unsubscribe_url="#").html
    response = make_response(html)
    response.headers["Content-Security-Policy"] = PREVIEW_CSP
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.route("/design/preview/confirmation")
def design_preview_confirmation():
    """The confirmation email as the saved texts and design make it, for a sample reader."""
    sample_list = MailingList(name=_("Your newsletter"), description="")
    # ?texts=<tag>: as a reader of that language gets it.
    reader = Subscriber(email="alex@example.com", name="", attributes={},
                        locale=request.args.get("texts") if request.args.get("texts") in LOCALES
                        else None)
    rendered = signup_texts.confirmation_email(
        db.session, sample_list, reader, url_for("settings.design_page", _external=True))
    response = make_response(rendered.html)
    response.headers["Content-Security-Policy"] = PREVIEW_CSP
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.route("/design/texts", methods=["POST"])
def design_texts():
    form = TextsForm()
    if not form.validate_on_submit():
        return _render(texts_form=form, status=400)
    reset = request.form.get("reset") or None
    if reset is not None and reset not in signup_texts.BY_KEY:
        reset = None
    values = {t.key: request.form.get(t.key, "") for t in signup_texts.TEXTS}
    try:
        signup_texts.update_texts(db.session, values, reset=reset)
    except SettingsError as exc:
        db.session.rollback()
        getattr(form, exc.field).errors = [exc.message]
        return _render(texts_form=form, status=422)
    flash(_("“%(text)s” is back to its default.",
            text=_(signup_texts.BY_KEY[reset].label).split(" (")[0])
          if reset else _("Texts saved. New confirmation emails and the sign-up pages use them."),
          "success")
    return after_post(url_for("settings.design_page") + "#texts")


@bp.route("/design/texts/<tag>", methods=["POST"])
def design_texts_language(tag: str):
    """One language's versions of the texts and the footer (blank: the default text)."""
    form = LocalizedForm()
    if not form.validate_on_submit():
        return _render(localized_form=form, status=400)
    values = {key: request.form.get(key, "") for key in signup_texts.LOCALIZED_KEYS}
    try:
        signup_texts.update_localized(db.session, tag, values)
    except SettingsError as exc:
        db.session.rollback()
        if exc.field == "locale":  # not a language one may write versions in
            flash(exc.message, "error")
            return redirect(url_for("settings.design_page") + "#texts")
        getattr(form, exc.field).errors = [exc.message]
        return _render(localized_form=form, status=422)
    flash(_("The %(language)s texts are saved. Readers in %(language)s get them from now on; "
            "a blank one uses the default text.", language=LOCALE_NAMES[tag]), "success")
    return after_post(url_for("settings.design_page", texts=tag) + "#texts")


@bp.route("/design/language", methods=["POST"])
def design_language():
    form = LanguageForm()
    if not form.validate_on_submit():
        return _render(language_form=form, status=400)
    try:
        signup_texts.set_default_language(db.session, request.form.get("default_language"))
    except SettingsError as exc:
        db.session.rollback()
        form.default_language.errors = [exc.message]
        return _render(language_form=form, status=422)
    flash(_("Readers who chose no language, on lists without one, now get %(language)s.",
            language=LOCALE_NAMES[request.form["default_language"]]), "success")
    return after_post(url_for("settings.design_page") + "#texts")
