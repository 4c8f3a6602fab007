"""Every check, in the order a self-hoster fixes things, and the CLI's printout of them."""

from __future__ import annotations

from flask import Flask

from webapp.doctor.backups import check_backups
from webapp.doctor.check import Check
from webapp.doctor.configuration import check_base_url, check_configuration
from webapp.doctor.dns import check_dns
from webapp.doctor.identities import check_default_mailbox, check_identity, identity_rows
from webapp.doctor.services import check_database, check_redis
from webapp.doctor.smtp import check_smtp
from webapp.doctor.worker import UTC_ZONE, check_worker
from webapp.templating import owner_zone


def run_checks(app: Flask, *, smtp: bool = True) -> list[Check]:
    """Every check, in the order a self-hoster fixes things. `smtp=False` skips the network
    conversations with the mail server and each identity's transport (the page shows the last
    stored results instead)."""
    redis = app.extensions["broadside_redis"]
    namespace = app.config["BROADSIDE_NAMESPACE"]
    checks = [check_configuration(app.config), check_database(app)]
    # Times in the owner's zone (Settings), read only once the database answered quickly: a
    # database that does not answer must not stall the checks.
    zone = owner_zone() if checks[1].ok else UTC_ZONE
    others = identity_rows(app) if checks[1].ok else []
    checks += [check_redis(redis, app.config["REDIS_URL"]),
               check_worker(redis, namespace, zone, others)]
    backups = check_backups(app.config)  # when BACKUP_DIR is set
    if backups is not None:
        checks.append(backups)
    if smtp:
        checks.append(check_smtp(app, database_ok=bool(checks[1].ok)))
        if app.config.get("BOUNCE_MAILBOX_URL"):
            checks.append(check_default_mailbox(app))
        if checks[1].ok:
            checks.extend(check_identity(app, i) for i in others)
            checks.extend(check_dns(app))
    checks.append(check_base_url(app.config["BASE_URL"]))
    return checks


def report(app: Flask, echo=print) -> int:
    """Print one line per check (and the configuration values); 0 only when all pass."""
    checks = run_checks(app)
    for check in checks:
        echo(check.line())
        for detail in check.details:
            echo(f"    {detail}")
    failed = [c.name for c in checks if c.ok is not True and not c.warning]
    warnings = sum(1 for c in checks if c.warning and not c.ok)
    echo(f"{len(checks) - len(failed) - warnings} of {len(checks)} checks passed"
         + (f", {warnings} warning{'s' if warnings != 1 else ''} (they do not stop sending)"
            if warnings else "")
         + (f"; fix: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
