"""Public sign-up pages (no login, no CSRF token: the form is embedded on other sites, so a
honeypot field and a per-IP throttle keep bots out instead)."""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, render_template, request, url_for
from redis.exceptions import RedisError

from broadside.audience import signup
from broadside.core.errors import ValidationError
from broadside.core.i18n import current_locale
from broadside.core.models import MailingList, SiteSettings, Subscriber
from broadside.mail.signup_texts import OWN, own_language, text_sources
from webapp import throttle
from webapp.address_warnings import warnings_for
from webapp.extensions import csrf, db, get_jobs
from webapp.forms import after_post
from webapp.security import public
from webapp.signup.language import content_markup, lang_arg, page_language
from webapp.steady_answers import SteadyAnswer

bp = Blueprint("signup", __name__)
log = logging.getLogger(__name__)

HONEYPOT_FIELD = "website"
DEFAULT_IP_LIMIT = 10
DEFAULT_IP_WINDOW_SECONDS = 600
# The form says "check your inbox" to everybody, but a newcomer costs a subscriber, a
# subscription and a rendered confirmation email queued in Redis, and somebody already on the
# list (or suppressed) costs a few reads: the time would tell. So each such answer leaves this
# long after the request began (SIGNUP_ANSWER_SECONDS), well beyond that difference
# (webapp.steady_answers; bench/steady_answers.py measures both cases).
DEFAULT_ANSWER_SECONDS = 0.25


def _within_ip_limit() -> bool:
    config = current_app.config
    try:
        return throttle.hit(
            f"signup:ip:{throttle.client_key(request.remote_addr)}",
            int(config.get("SIGNUP_IP_LIMIT", DEFAULT_IP_LIMIT)),
            int(config.get("SIGNUP_IP_WINDOW_SECONDS", DEFAULT_IP_WINDOW_SECONDS)),
        )
    except RedisError:
        # Fail open: the honeypot and the one-email-per-10-minutes rule (in the database)
        # still hold, and a sign-up form that breaks with Redis would lose real readers.
        log.warning("sign-up throttle unavailable (Redis error); allowing")
        return True


@bp.route("/join/<int:list_id>", methods=["GET"])
@public("a list's public sign-up form (only when the owner opened it)")
def join(list_id: int):
    mailing_list = signup.public_list(db.session, list_id)
    page_language(mailing_list)
    return _page("signup/join.html", mailing_list, "join_heading", email="", name="",
                 error=None)


def _page(template: str, mailing_list: MailingList, text_key: str | None = None,
          **context: object) -> str:
    """A sign-up page in the language chosen (webapp.signup.language), laid out right to left
    when the owner's text it shows is in such a language, `?lang=` kept on its links."""
    markup = {}
    if text_key is not None:
        settings = db.session.get(SiteSettings, 1)
        _text, written_in = text_sources(settings, current_locale())[text_key]
        markup = content_markup(own_language(settings, mailing_list) if written_in == OWN
                                else written_in)
    return render_template(template, list=mailing_list, lang_arg=lang_arg(), **markup,
                           **context)


@bp.route("/join/<int:list_id>", methods=["POST"])
@public("a public form with no session to ride: per-network limit, honeypot, double opt-in")
@csrf.exempt
def join_post(list_id: int):
    answer = SteadyAnswer(current_app.config.get("SIGNUP_ANSWER_SECONDS", DEFAULT_ANSWER_SECONDS))
    mailing_list = signup.public_list(db.session, list_id)
    page_language(mailing_list)
    if not _within_ip_limit():
        return _page("signup/throttled.html", mailing_list), 429
    if request.form.get(HONEYPOT_FIELD):
        # A bot filled the field people cannot see: answer as usual, do nothing.
        answer.wait()
        return after_post(url_for("signup.check_inbox", list_id=list_id, **lang_arg()))
    email = request.form.get("email", "")
    name = request.form.get("name", "")
    try:
        # The language the form was shown in becomes the reader's (when they have none), and
        # so does the time zone their browser gave (static/timezone.js fills the field).
        signup.sign_up(db.session, list_id, email, name, links=_links(), jobs=get_jobs(),
                       warn=warnings_for, locale=current_locale(),
                       timezone=request.form.get("timezone", "")[:64])
    except ValidationError as exc:
        db.session.rollback()
        return _page("signup/join.html", mailing_list, "join_heading", email=email[:320],
                     name=name[:200], error=exc.message, error_field=exc.field), 422
    answer.wait()
    # A reload of the page that follows asks for nothing again.
    return after_post(url_for("signup.check_inbox", list_id=list_id, **lang_arg()))


@bp.route("/join/<int:list_id>/check-inbox", methods=["GET"])
@public("where the sign-up form leads: the list's 'check your inbox' words, nobody's data")
def check_inbox(list_id: int):
    mailing_list = signup.public_list(db.session, list_id)
    page_language(mailing_list)
    return _page("signup/check_inbox.html", mailing_list, "check_inbox")


@bp.route("/join/confirm/<token>", methods=["GET"])
@public("the double opt-in link's page: the signed confirmation token is the credential; a GET "
        "changes nothing")
def confirm_page(token: str):
    # A GET changes nothing: mail scanners follow links. The reader presses Confirm.
    _speak_to(token)
    try:
        mailing_list, active = signup.confirmation_page(db.session, _links(), token)
    except signup.LeftSinceLink as left:
        return _left_since(left)
    return _page("signup/confirm.html", mailing_list, active=active, token=token)


@bp.route("/join/confirm/<token>", methods=["POST"])
@public("confirming a sign-up: the signed confirmation token is the credential")
@csrf.exempt
def confirm(token: str):
    _speak_to(token)
    try:
        mailing_list = signup.confirm(db.session, _links(), token)
    except signup.LeftSinceLink as left:
        return _left_since(left)
    return _page("signup/confirmed.html", mailing_list, "confirmed")


def _speak_to(token: str) -> None:
    """The confirmation link's pages speak its reader's language (their list's, else the
    browser's, when they have none); an invalid link's page the browser's."""
    claim = signup.read_token(_links(), token)
    reader = db.session.get(Subscriber, claim.subscriber_id) if claim is not None else None
    mailing_list = db.session.get(MailingList, claim.list_id) if claim is not None else None
    page_language(mailing_list, reader.locale if reader is not None else None)


def _left_since(left: signup.LeftSinceLink):
    """The reader's own page, not the owner's error page: what happened, and the list's
    sign-up form when it has one (a new link is the only way back)."""
    return _page("signup/left_since.html", left.mailing_list,
                 message=str(left)), left.status_code


def _links() -> signup.Links:
    return signup.Links(current_app.config["SECRET_KEY"], current_app.config["BASE_URL"])
