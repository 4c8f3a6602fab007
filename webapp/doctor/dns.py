"""The DNS checks of every sending identity (SPF, DKIM, DMARC, the bounce domain's MX), as
`doctor` prints them and the identities page shows them (broadside.delivery.dns_checks).

They are warnings, never failures: a missing DMARC record does not stop sending, so `doctor`
marks them "!" and still exits 0. `doctor` asks afresh and keeps what it found for the page; the
page shows what is kept (at most ten minutes old) and asks only when nothing is. Once the
resolver failed to answer for one identity, the next ones are not asked again in the same run:
each says so, so a dead resolver costs `doctor` seconds, not seconds per identity.
"""

from __future__ import annotations

import logging

from flask import Flask
from sqlalchemy.exc import SQLAlchemyError

from broadside.delivery.dns_checks import subject as dns
from broadside.delivery.dns_checks.records import DnsCheck
from broadside.delivery.identities.service import SendingIdentity, all_identities
from webapp.doctor.check import Check
from webapp.extensions import db

log = logging.getLogger("broadside.doctor")


def result_for(app: Flask, identity: SendingIdentity, *, again: bool = False) -> dns.DnsResult:
    """The kept result (or, none kept or `again`, a new one) of the identity's DNS checks."""
    return dns.check(app.extensions["broadside_redis"], app.config["BROADSIDE_NAMESPACE"],
                     app.config["SECRET_KEY"], identity, dns.subject_of(db.session, identity),
                     app.config["DNS_RESOLVER"], again=again)


def kept_for(app: Flask, identity: SendingIdentity) -> dns.DnsResult | None:
    return dns.kept(app.extensions["broadside_redis"], app.config["BROADSIDE_NAMESPACE"],
                    app.config["SECRET_KEY"], identity, dns.subject_of(db.session, identity),
                    app.config["DNS_RESOLVER"])


def as_check(identity: SendingIdentity, found: DnsCheck) -> Check:
    summary = f"{found.name}: {found.state_words}. {found.sentence}"
    return Check(f"DNS {found.label} of {identity.label}", found.state == "ok", summary,
                 f"add {found.record}" if found.record else "", warning=found.state != "ok")


def check_dns(app: Flask) -> list[Check]:
    """A line per identity per check (the outbox's none: it sends nothing)."""
    try:
        with app.app_context():
            identities = all_identities(db.session, app.config)
    except SQLAlchemyError:
        return []  # the database check says why
    lines: list[Check] = []
    down = ""
    with app.app_context():
        for identity in identities:
            if down:
                lines.append(Check(f"DNS of {identity.label}", None, f"not asked: {down}",
                                   warning=True))
                continue
            result = result_for(app, identity, again=True)
            lines.extend(as_check(identity, c) for c in result.checks)
            if any(c.state == "could_not_ask" for c in result.checks):
                down = f"{app.config['DNS_RESOLVER'] or 'the resolver'} gave no answer for {identity.label}"
    return lines
