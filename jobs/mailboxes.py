"""The worker's bounce mailbox reader: `Mailboxes`, a thread of its own beside the streams,
the maintenance thread and the webhook runner.

Why its own thread and not the maintenance tick: an IMAP server that answers slowly holds
its reader up to the socket timeout (20 s) per command, and the maintenance thread's orphan
repair (every 5 s: invariant 7) and its following of the identities must not wait behind it;
nor may any stream's send loop. Every BOUNCE_MAILBOX_POLL_SECONDS it makes a round: each
mailbox named by a live identity (the default's is BOUNCE_MAILBOX_URL), once even when
several identities share it, is read in bounded batches within a time budget
(broadside.feedback.mailbox.reading: once only, moved after the commit), and a round with
mail left over comes back at once.

One reader per mailbox across worker processes: a Redis lease per mailbox
(broadside.delivery.lease.Lease, keyed `mailbox:<key>`, taken with SET NX, renewed between
batches, released after the pass, taken at once from a holder proven dead). The lease only
saves work: two readers at once would still apply each message once (the processed row's
UNIQUE key), and a move of a message already moved is no error.

A mailbox that cannot be read (refused login, no such folder, a timeout) records its error
in the owner's words for the System page and is tried again at the next round.
"""

from __future__ import annotations

import logging
import threading

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from broadside.core import mailbox_urls
from broadside.core.logs import redact_also
from broadside.core.timeutil import utcnow
from broadside.delivery.identities import service as identity_service
from broadside.delivery.lease import Lease
from broadside.feedback.mailbox import state
from broadside.feedback.mailbox.imap import MailboxError
from broadside.feedback.mailbox.reading import read_mailbox
from broadside.mail.verp import Verp
from jobs.app import WorkerApp
from jobs.database import db

log = logging.getLogger("broadside.feedback")


def mailboxes_of(app: WorkerApp) -> dict[str, tuple[mailbox_urls.Mailbox, str]]:
    """Every live identity's mailbox, once each by its key: (its parts, its masked URL)."""
    found: dict[str, tuple[mailbox_urls.Mailbox, str]] = {}
    for identity in identity_service.all_identities(db.session(), app.config):
        url = identity.bounce_mailbox_url
        if not url:
            continue
        try:
            box = mailbox_urls.parse(url)
        except mailbox_urls.MailboxUrlError as exc:
            log.warning("identity %s: its bounce mailbox URL is not usable: %s", identity.label, exc)
            continue
        redact_also(mailbox_urls.secrets_in_url(url))
        found.setdefault(box.key, (box, mailbox_urls.describe(url)))
    return found


class Mailboxes(threading.Thread):
    """Reads every bounce mailbox, round after round, until stopped."""

    def __init__(self, app: WorkerApp) -> None:
        # A daemon: a cold shutdown does not wait for an IMAP server.
        super().__init__(name="broadside-mailboxes", daemon=True)
        self.app = app
        self.stopping = threading.Event()
        self.poll_s = float(app.config.get("BOUNCE_MAILBOX_POLL_SECONDS", 60))
        self.batch = int(app.config.get("BOUNCE_MAILBOX_BATCH", 50))
        self.verp = Verp(app.config["SECRET_KEY"])

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        redis = Redis.from_url(self.app.config["REDIS_URL"], socket_timeout=2, socket_connect_timeout=2)
        try:
            while not self.stopping.is_set():
                more = False
                try:
                    more = self.round(redis)
                except (SQLAlchemyError, RedisError) as exc:
                    log.warning("bounce mailboxes: this round failed (%s); trying again later",
                                exc.__class__.__name__)
                finally:
                    db.session.remove()
                if not more:
                    self.stopping.wait(self.poll_s)
        finally:
            redis.close()

    def round(self, redis: Redis) -> bool:
        """Read each mailbox once; True when one has mail left for the next round."""
        more = False
        for key, (box, label) in mailboxes_of(self.app).items():
            if self.stopping.is_set():
                break
            lease = Lease(redis, self.app.config["BROADSIDE_NAMESPACE"], stream=f"mailbox:{key}")
            if not lease.try_acquire() and not (lease.take_from_dead() and lease.try_acquire()):
                continue  # another worker reads it now
            try:
                more |= self._read(key, box, label, lease)
            finally:
                try:
                    lease.release()
                except RedisError:
                    pass  # it expires by itself
        return more

    def _read(self, key: str, box: mailbox_urls.Mailbox, label: str, lease: Lease) -> bool:
        session = db.session()
        state.ensure(session, key, label)

        def keep() -> bool:
            return not self.stopping.is_set() and lease.renew()

        try:
            done = read_mailbox(session, box, self.verp, keep=keep, batch=self.batch)
        except MailboxError as exc:
            session.rollback()
            log.warning("bounce mailbox %s: %s", label, exc)
            state.failed(session, key, str(exc), utcnow())
            return False
        if done.applied or done.again:
            log.info("bounce mailbox %s: %d applied, %d already applied (moved only)%s", label,
                     done.applied, done.again, "; more left" if done.more else "")
        return done.more
