"""Each identity's DNS checks on Settings → Sending identities (for the signed-in owner):

    GET  /settings/identities/<id>/dns        the DNS section (htmx loads it after the page):
    GET  /settings/identities/default/dns     what is kept, else asked now (bounded: seconds)
    POST /settings/identities/<id>/dns        "Check DNS again": asked now and kept; htmx gets
    POST /settings/identities/default/dns     the section, a browser without it the page back

The page itself renders what is kept (`dns_kept`), so it never waits on DNS; a section with
nothing kept loads itself. The checks are webapp.doctor.dns's, shared with `doctor`.
"""

from __future__ import annotations

from flask import current_app, flash, redirect, render_template, url_for

from broadside.core.errors import NotFound
from broadside.core.i18n import _, ngettext
from broadside.delivery.dns_checks.subject import DnsResult
from broadside.delivery.identities import service
from broadside.delivery.identities.service import SendingIdentity
from webapp.doctor.dns import kept_for, result_for
from webapp.extensions import db
from webapp.htmx import request
from webapp.identities import bp


def _identity(identity_id: int | None) -> SendingIdentity:
    if identity_id is None:
        return service.default_identity(db.session, current_app.config)
    identity = service.resolve(db.session, current_app.config, identity_id)
    if identity.status == "deleted":
        raise NotFound(f"There is no sending identity {identity_id}.")
    return identity


def anchor_of(identity: SendingIdentity) -> str:
    return "identity-default" if identity.id is None else f"identity-{identity.id}"


@bp.app_template_global()
def dns_kept(identity: SendingIdentity) -> DnsResult | None:
    """The identity's kept DNS result, for the list page (None: the section loads itself)."""
    return kept_for(current_app, identity)


def _section(identity: SendingIdentity, result: DnsResult):
    return render_template("identities/_dns.html", i=identity, anchor=anchor_of(identity),
                           result=result, resolver=current_app.config["DNS_RESOLVER"])


def _show(identity_id: int | None):
    identity = _identity(identity_id)
    return _section(identity, result_for(current_app, identity))


def _again(identity_id: int | None):
    identity = _identity(identity_id)
    result = result_for(current_app, identity, again=True)
    if request.htmx:
        return _section(identity, result)
    problems = sum(1 for c in result.checks if c.state != "ok")
    if problems:
        said = ngettext("%(identity)s: DNS checked; %(problems)s of %(num)s check needs attention.",
                        "%(identity)s: DNS checked; %(problems)s of %(num)s checks need attention.",
                        len(result.checks), identity=identity.label, problems=problems)
    elif result.checks:
        said = _("%(identity)s: DNS checked: every check is ok.", identity=identity.label)
    else:
        said = _("%(identity)s: DNS checked: nothing to check.", identity=identity.label)
    flash(said, "warning" if problems else "success")
    return redirect(url_for(".index") + f"#dns-{anchor_of(identity)}")


@bp.get("/default/dns")
def dns_default():
    return _show(None)


@bp.get("/<int:identity_id>/dns")
def dns(identity_id: int):
    return _show(identity_id)


@bp.post("/default/dns")
def dns_again_default():
    return _again(None)


@bp.post("/<int:identity_id>/dns")
def dns_again(identity_id: int):
    return _again(identity_id)
