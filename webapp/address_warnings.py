"""What the owner is told when an address arrives that some sending identities cannot reach
(a local part outside ASCII needs SMTPUTF8: broadside.delivery.identities.international), for the API,
the sign-up form's owner-side record and the import report."""

from __future__ import annotations

from flask import current_app

from broadside.core.addresses import needs_smtputf8
from broadside.delivery.identities import international
from broadside.delivery.identities.service import all_identities
from webapp.extensions import db


def unreachable(address: str) -> list[str]:
    """The identities (each with why) that cannot reach `address`; [] for most addresses,
    which need no SMTPUTF8 (and then nothing is asked of the database or Redis)."""
    if not needs_smtputf8(address):
        return []
    config = current_app.config
    return international.unreachable_by(current_app.extensions["broadside_redis"],
                                config["BROADSIDE_NAMESPACE"], config["SECRET_KEY"], address,
                                all_identities(db.session, config))


def warnings_for(address: str) -> list[str]:
    """The owner's words: one warning, or none."""
    found = unreachable(address)
    return [international.warning(address, found)] if found else []


def identities_without_smtputf8() -> list[str]:
    """The identities (each with why) that cannot reach any address that needs SMTPUTF8."""
    config = current_app.config
    return international.without_smtputf8(current_app.extensions["broadside_redis"],
                                  config["BROADSIDE_NAMESPACE"], config["SECRET_KEY"],
                                  all_identities(db.session, config))
