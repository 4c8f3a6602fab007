"""Settings → Sending identities (blueprint `identities`, all for the signed-in owner):

    GET  /settings/identities/                  every identity, the default first (From, the
                                                transport masked, pace, cap, state, what uses
                                                it), and the "New identity" form
    POST /settings/identities/                  create: a refusal (422) or a taken name (409)
                                                shows the list again with everything typed
                                                kept, except the secrets
    GET/POST /settings/identities/<id>/edit     edit: the transport URL and the webhook secret
                                                are empty, and left empty they stay as stored
    GET/POST /settings/identities/<id>/delete   a confirmation, then the delete (409 in words
                                                while a broadcast or an automation uses it)
    POST /settings/identities/<id>/check        "Check connection": the doctor's check of its
    POST /settings/identities/default/check     transport (the default's is the SMTP check);
                                                htmx gets the ✓/✗ line, 200 either way
    POST /settings/identities/<id>/resume       resume a paused identity (the System page's
    POST /settings/identities/default/resume    Resume posts here too, with back=system)

The default identity is the environment (SMTP_URL, MAIL_FROM or the Settings sender,
SEND_DELAY_MS, SEND_HOURLY_LIMIT, the Settings postal address): it is listed, checked and
resumed here, and edited where each part is set. Stored secrets are never rendered.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app, flash, redirect, render_template, url_for
from redis.exceptions import RedisError

from broadside.campaigns.automations import refreeze
from broadside.core import transport_urls as urls
from broadside.core.errors import Conflict, DomainError, NotFound, ValidationError
from broadside.core.i18n import _, ngettext
from broadside.core.site_settings import get_settings
from broadside.delivery import account_limit
from broadside.delivery.identities import accounts, bound, service
from broadside.delivery.identities.service import SendingIdentity
from webapp.doctor.check import Check
from webapp.doctor.identities import check_identity
from webapp.doctor.smtp import check_smtp
from webapp.extensions import db
from webapp.forms import after_post
from webapp.htmx import request
from webapp.identities import bp, form

# Providers whose delivery and bounce webhooks are matched to an identity by its id in the URL.
WEBHOOK_SCHEMES = ("postmark", "resend", "mailgun")


@dataclass(frozen=True)
class Row:
    identity: SendingIdentity
    used: dict[str, int] | None  # None: the default, which is never deleted
    webhook_url: str | None
    dkim: dict | None = None  # its DKIM record to publish (service.dkim_shown), None: unsigned

    @property
    def in_use(self) -> str | None:
        """Why it cannot be deleted now, in words; None when it can."""
        if not self.used:
            return None
        broadcasts, automations = self.used["broadcasts"], self.used["automations"]
        if broadcasts and automations:
            return _("Used by %(broadcasts)s and %(automations)s: choose another identity for "
                     "them first.",
                     broadcasts=ngettext("%(num)s broadcast not yet sent",
                                         "%(num)s broadcasts not yet sent", broadcasts),
                     automations=ngettext("%(num)s automation", "%(num)s automations",
                                          automations))
        if broadcasts:
            return ngettext("Used by %(num)s broadcast not yet sent: choose another identity for "
                            "them first.", "Used by %(num)s broadcasts not yet sent: choose "
                            "another identity for them first.", broadcasts)
        if automations:
            return ngettext("Used by %(num)s automation: choose another identity for them first.",
                            "Used by %(num)s automations: choose another identity for them "
                            "first.", automations)
        return None


def webhook_url(identity: SendingIdentity) -> str | None:
    """Where the provider should post its delivery and bounce events for this identity."""
    if identity.id is None or identity.scheme not in WEBHOOK_SCHEMES:
        return None
    return f"{current_app.config['BASE_URL']}/webhooks/{identity.scheme}/{identity.id}"


def _row(identity: SendingIdentity) -> Row:
    used = service.usage(db.session, identity.id) if identity.id is not None else None
    return Row(identity, used, webhook_url(identity), service.dkim_shown(identity))


def _live(identity_id: int) -> SendingIdentity:
    """A live identity that is a row; a deleted one is not found, as over the API."""
    identity = service.resolve(db.session, current_app.config, identity_id)
    if identity.status == "deleted":
        raise NotFound(f"There is no sending identity {identity_id}.")
    return identity


def _page_help() -> dict:
    """What the form's help texts name: the transport examples, the env, Settings' address."""
    return {"examples": urls.EXAMPLES, "settings_postal": get_settings(db.session).postal_address,
            "base_url": current_app.config["BASE_URL"], "webhook_schemes": WEBHOOK_SCHEMES}


@dataclass(frozen=True)
class Bound:
    """MAX_IDENTITIES and how many count against it: the page says it, and hides the form
    once reached (the service refuses past it: service.create)."""
    count: int
    limit: int

    @property
    def full(self) -> bool:
        return self.count >= self.limit

    @property
    def reason(self) -> str:
        return bound.limit_reached(self.count, self.limit)


@dataclass(frozen=True)
class AccountGroup:
    """The identities of one provider account, with its ceiling and the rate it achieved."""
    label: str
    rows: list[Row]
    rate: float | None  # the ceiling in force (SES's cap included), None: none
    achieved: float | None  # requests a second over the last 10 s (counted under a ceiling)
    ses_max_rate: float | None


def _groups(rows: list[Row]) -> list[AccountGroup]:
    by_identity = {r.identity.key: r for r in rows}
    redis = current_app.extensions["broadside_redis"]
    namespace, secret = current_app.config["BROADSIDE_NAMESPACE"], current_app.config["SECRET_KEY"]
    groups = []
    for account in accounts.grouped([r.identity for r in rows]):
        digest = account_limit.account_digest(account.url, secret)
        achieved = ses = None
        if digest is not None:
            try:
                achieved = account_limit.achieved_rate(redis, namespace, digest)
                ses = account_limit.ses_max_rate(redis, namespace, digest)
            except RedisError:
                pass  # the System page says Redis is down; the page still shows the identities
        rate = account_limit.effective_rate(account.members[0].account_rate, ses)
        groups.append(AccountGroup(account.label, [by_identity[i.key] for i in account.members],
                                   rate if digest is not None else None, achieved, ses))
    return groups


def _shares(identity_id: int, transport_url: str) -> str:
    """The warning a save gets when other identities send through the same account."""
    others = accounts.sharing_with(transport_url, [
        (i.label, i.transport_url)
        for i in service.all_identities(db.session, current_app.config) if i.id != identity_id])
    if not others:
        return ""
    return _("It sends through the same provider account as %(others)s: they share one account "
             "limit, the smallest provider account limit set on any of them.",
             others=", ".join(f"“{n}”" for n in others))


def _render_index(values: dict[str, str] | None = None, *, error: DomainError | None = None,
                  secret_dropped: bool = False, status: int = 200):
    rows = [_row(i) for i in service.all_identities(db.session, current_app.config)]
    limits = Bound(sum(1 for r in rows if not r.identity.is_default), current_app.config["MAX_IDENTITIES"])
    return render_template(
        "identities/index.html", rows=rows, groups=_groups(rows), bound=limits,
        values=form.shown(values or form.EMPTY),
        error=error and error.message, error_field=form.field_of(error),
        secret_dropped=secret_dropped,
        mail_from=current_app.config["MAIL_FROM"], **_page_help(),
    ), status


@bp.get("/")
def index():
    return _render_index()


@bp.post("/")
def create():
    values = form.read_form(request.form)
    try:
        data = service.check_endpoint(service.parse_input(form.as_body(values, updating=False)),
                                      current_app.config)
        row = service.create(db.session, data, limit=current_app.config["MAX_IDENTITIES"])
    except (ValidationError, Conflict) as exc:
        db.session.rollback()
        return _render_index(values, error=exc, status=exc.status_code,
                             secret_dropped=form.typed_a_secret(values))
    flash(" ".join(filter(None, (
        _("The identity “%(name)s” is saved. Press Check connection to try its transport; "
          "broadcasts and automations can choose it now.", name=row.name),
        _publish(row.dkim_selector)))), "success")
    shared = _shares(row.id, row.transport_url)
    if shared:
        flash(shared.strip(), "warning")
    return after_post(url_for(".index") + f"#identity-{row.id}")


def _publish(selector: str) -> str:
    """What a save that turned DKIM on (or changed its key) asks the owner to do."""
    if not selector:
        return ""
    return _("Publish its DKIM TXT record (shown with the identity) before sending: until it is "
             "in DNS, receivers cannot check the signature.")


def _render_edit(identity: SendingIdentity, values: dict[str, str], *,
                 error: DomainError | None = None, secret_dropped: bool = False, status: int = 200):
    return render_template(
        "identities/edit.html", identity=identity, row=_row(identity), values=form.shown(values),
        error=error and error.message, error_field=form.field_of(error),
        secret_dropped=secret_dropped, dkim_view=service.dkim_shown(identity),
        automations_reached=refreeze.reaching(db.session, identity.id), **_page_help(),
    ), status


@bp.route("/<int:identity_id>/edit", methods=["GET", "POST"])
def edit(identity_id: int):
    identity = _live(identity_id)
    if request.method == "GET":
        return _render_edit(identity, form.from_saved(identity))
    values = form.read_form(request.form)
    body = form.as_body(values, updating=True, clear_secret=bool(request.form.get("clear_webhook_secret")),
                        clear_mailbox=bool(request.form.get("clear_bounce_mailbox")))
    try:
        row, refrozen = refreeze.update_identity(db.session, identity_id,
                                                 service.check_endpoint(
                                                     service.parse_input(body, updating=True),
                                                     current_app.config),
                                                 default_from=current_app.config["MAIL_FROM"])
    except (ValidationError, Conflict) as exc:
        db.session.rollback()
        return _render_edit(identity, values, error=exc, status=exc.status_code,
                            secret_dropped=form.typed_a_secret(values))
    resumed = identity.status == "paused" and row.status == "active"
    new_key = row.dkim_private_key != identity.dkim_private_key or row.dkim_selector != identity.dkim_selector
    flash(" ".join(filter(None, (
        _("The identity “%(name)s” is saved.", name=row.name),
        _("Its new transport URL resumed it: press Check connection to try it.") if resumed else "",
        refrozen.words() if refrozen.names else "",
        _publish(row.dkim_selector) if new_key else ""))), "success")
    shared = _shares(identity_id, row.transport_url)
    if shared:
        flash(shared.strip(), "warning")
    return after_post(url_for(".index") + f"#identity-{identity_id}")


@bp.route("/<int:identity_id>/delete", methods=["GET", "POST"])
def delete(identity_id: int):
    identity = _live(identity_id)
    if request.method == "POST":
        try:
            service.delete(db.session, identity_id)
        except Conflict as exc:
            db.session.rollback()
            return render_template("identities/delete.html", row=_row(identity),
                                   error=exc.message), exc.status_code
        flash(_("The identity “%(name)s” is deleted. Broadcasts sent through it still name it.",
                name=identity.name), "success")
        return redirect(url_for(".index"))
    return render_template("identities/delete.html", row=_row(identity), error=None)


# ------------------------------------------------------------------ check and resume


def _answer_check(identity: SendingIdentity, check: Check):
    anchor = "identity-default" if identity.id is None else f"identity-{identity.id}"
    if request.htmx:
        # 200 even when the check failed: htmx swaps no 4xx answer.
        return render_template("identities/_check.html", check=check, anchor=anchor)
    flash(f"{identity.label}: {check.summary}" + (f" → {check.advice}" if check.advice else ""),
          "success" if check.ok else "error")
    return redirect(url_for(".index") + f"#{anchor}")


@bp.post("/default/check")
def check_default():
    identity = service.default_identity(db.session, current_app.config)
    return _answer_check(identity, check_smtp(current_app))


@bp.post("/<int:identity_id>/check")
def check(identity_id: int):
    identity = _live(identity_id)
    return _answer_check(identity, check_identity(current_app, identity))


def _resumed(identity_id: int | None, label: str):
    moved = service.resume(db.session, identity_id)
    flash(_("“%(name)s” is resumed: its mail goes out again.", name=label) if moved
          else _("“%(name)s” was not paused.", name=label), "success" if moved else "info")
    if request.form.get("back") == "system":
        return redirect(url_for("system.index") + "#sender")
    anchor = "default" if identity_id is None else str(identity_id)
    return redirect(url_for(".index") + f"#identity-{anchor}")


@bp.post("/default/resume")
def resume_default():
    return _resumed(None, "Default")


@bp.post("/<int:identity_id>/resume")
def resume(identity_id: int):
    return _resumed(identity_id, _live(identity_id).name)
