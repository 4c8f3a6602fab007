"""The sending worker, one paced stream per sending identity, all in one process: `python -m
jobs` (or the `broadside-worker` script; `flask --app webapp worker` runs the same code in the
web app).

Each identity's stream is a thread of this process holding that identity's lease (invariant
1, per identity: jobs.stream), with its own pace, hourly cap, transport, Redis connections
and database session, so one stream's slow provider never holds another's. Without
`--identity` every identity is served, and identities added, changed or deleted while the
worker runs are followed at the next maintenance tick (jobs.supervisor); `--identity NAME`
(repeatable) serves only those, so a large installation can spread its identities over as
many machines as it likes. A second worker serving the same identity waits for its lease.

The main thread owns the signals (RQ's own handlers work only there, and RQ runs in the
streams' threads: jobs.rq_worker). SIGTERM or SIGINT is a warm shutdown: every stream
finishes the send in flight, records it, and releases its lease; a second signal within a
second is the same one repeated (a deploy tool, Ctrl+C), one more than a second later is a
cold shutdown: no stream starts another send, the leases are released, the process ends,
and the sends cut off mid-conversation are `unknown` to the next worker's orphan repair
(invariant 5). SIGKILL loses at most the rows in flight, the same way.

Outgoing webhooks are POSTed by the process's webhook runner (jobs.webhooks_out), on threads
of its own beside the streams and the maintenance thread, so no receiver holds a stream. A
warm shutdown lets its POSTs in flight end (each within WEBHOOKS_TIMEOUT_SECONDS); a cold
one does not wait for them. In burst mode (tests) the worker ends once the streams have ended
and every webhook event due has been attempted.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import SQLAlchemyError

from broadside.delivery.identities import service as identity_service
from broadside.delivery.identities.service import SendingIdentity
from jobs.app import WorkerApp, create_worker_app, schema_state
from jobs.database import db
from jobs.mailboxes import Mailboxes
from jobs.rq_worker import BroadsideWorker
from jobs.stream import recover_interrupted
from jobs.supervisor import Maintenance, Streams
from jobs.webhooks_out import Webhooks

log = logging.getLogger("broadside.worker")

# Where the tests and tools reach them (the job loop, the start's requeue of imports).
__all__ = ["BURST_HELP", "IDENTITY_HELP", "BroadsideWorker", "main", "recover_interrupted", "run_worker"]

BURST_HELP = "Exit when the queues are empty (for tests)."
IDENTITY_HELP = ("Serve only this sending identity's stream (repeatable; 'default' is the "
                 "environment's). Without it, every identity is served.")
REPEATED_WITHIN_S = 1.0  # a second signal sooner than this is the first one repeated (as RQ has it)
WATCH_EVERY_S = 0.1  # how often the main thread looks at the signals and the streams
# How long a thread that wants the interpreter's lock waits before the holder must hand it
# over (Python's default: 5 ms). A stream whose pace just ended waits that long behind
# another stream's rendering before its MAIL FROM is written, which the server sees as a gap
# shorter than the pace (invariant 2); at 1 ms the handover costs little and the pacer's
# margin covers most of it.
SWITCH_INTERVAL_S = 0.001


class Signals:
    """SIGTERM and SIGINT, noted by the main thread's handler and read by its loop. The handler
    only notes (a lock taken in a handler could be the one its own thread holds)."""

    def __init__(self) -> None:
        self.first_at: float | None = None
        self.cold = False

    def handle(self, signum, frame) -> None:
        now = time.monotonic()
        if self.first_at is None:
            self.first_at = now
        elif now - self.first_at >= REPEATED_WITHIN_S:
            self.cold = True

    def is_set(self) -> bool:
        return self.first_at is not None

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, less once a signal came; True if one did."""
        deadline = time.monotonic() + seconds
        while not self.is_set() and time.monotonic() < deadline:
            time.sleep(min(WATCH_EVERY_S, max(0.0, deadline - time.monotonic())))
        return self.is_set()

    @contextmanager
    def installed(self) -> Iterator[Signals]:
        """The handlers, in the main thread (elsewhere Python allows none: a caller running the
        worker in another thread stops it otherwise)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.signal(sig, self.handle) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def wait_for_schema(app: WorkerApp, stop: Signals) -> bool:
    """The web process applies migrations; the worker waits until they are in place."""
    said = False
    while not stop.is_set():
        try:
            with app.engine.connect() as connection:
                ready, current, head = schema_state(connection)
            if ready:
                return True
        except SQLAlchemyError as exc:
            current, head = f"unreachable ({exc.__class__.__name__})", "the migrations' head"
        if not said:
            log.info(
                "waiting for the database schema (at %s, need %s): run `flask --app webapp db upgrade`",
                current,
                head,
            )
            said = True
        stop.wait(1.0)
    return False


def served_identities(app: WorkerApp, names: tuple[str, ...]) -> list[SendingIdentity] | None:
    """The identities named (None, said in the log, when a name is nobody's), or, none named,
    every live one, the default first."""
    try:
        if not names:
            return identity_service.all_identities(db.session(), app.config)
        found = [(name, identity_service.by_name(db.session(), app.config, name)) for name in names]
        missing = [name for name, identity in found if identity is None]
        if missing:
            log.error("no sending identity called %s (see Settings → Sending identities)",
                      ", ".join(repr(m) for m in missing))
            return None
        return [identity for _, identity in found if identity is not None]
    finally:
        db.session.remove()


def run_worker(app: WorkerApp, burst: bool = False, identities: tuple[str, ...] = ()) -> int:
    """Serve every identity (none named) or the named ones, each stream a thread of this
    process, until SIGTERM (or, in burst mode, until every stream's queues are empty)."""
    db.bind(app.engine)
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        return _serve(app, burst, identities)
    finally:
        sys.setswitchinterval(switch_interval)


def _serve(app: WorkerApp, burst: bool, identities: tuple[str, ...]) -> int:
    with Signals().installed() as signals:
        if not wait_for_schema(app, signals):
            return 0
        served = served_identities(app, identities)
        if served is None:
            return 2
        if signals.is_set():
            return 0
        if burst and not identities:
            served = served[:1]  # the default's stream, as a test's burst has always meant
        streams = Streams(app, burst=burst, fixed=served if identities or burst else None)
        streams.start(served)
        maintenance = Maintenance(app, streams)
        maintenance.start()
        webhooks = Webhooks(app, burst=burst)
        webhooks.start()
        # The bounce mailboxes' reader (not in burst mode: a test's burst ends with its queues).
        mailboxes = Mailboxes(app)
        if not burst:
            mailboxes.start()
        try:
            while not signals.wait(WATCH_EVERY_S):
                if burst and streams.ended():
                    if not webhooks.draining.is_set():
                        webhooks.finish()  # the events the streams recorded are attempted first
                    if not webhooks.is_alive():
                        return streams.exit_code()
            log.info("stopping every stream: the sends in flight finish, the leases are released")
            return _stop(streams, webhooks, signals)
        finally:
            maintenance.done.set()
            mailboxes.stop()
            webhooks.stop()
            if not signals.cold:
                maintenance.join(5)  # a tick in progress ends before the caller goes on


def _stop(streams: Streams, webhooks: Webhooks, signals: Signals) -> int:
    """Wait for every stream's warm stop, then for the webhook POSTs in flight; a cold stop
    ends the wait (see the module's docstring)."""
    webhooks.stop()
    for stream in streams.stop_all():
        while stream.is_alive():
            if signals.cold:
                log.warning("cold shut down: the sends in flight are cut off (unknown, never resent)")
                streams.abandon_all()
                return 1
            stream.join(WATCH_EVERY_S)
    for delivering in (lambda: [webhooks], webhooks.in_flight):  # no new one once it ended
        for thread in delivering():
            while thread.is_alive():
                if signals.cold:
                    log.warning("cold shut down: the webhook POSTs in flight are cut off "
                                "(counted as failed attempts, sent again later)")
                    return 1
                thread.join(WATCH_EVERY_S)
    log.info("worker stopped")
    return 0


def main(argv: list[str] | None = None) -> None:
    """`python -m jobs [--identity NAME]... [--burst]`: the sending worker, the lean way (no web
    app in the process). The options are `flask --app webapp worker`'s (jobs.flask_command)."""
    parser = argparse.ArgumentParser(
        prog="broadside-worker",
        description="Run the sending worker: one paced stream per sending identity, each a "
                    "thread of this process (RQ, concurrency 1 each).")
    parser.add_argument("--burst", action="store_true", help=BURST_HELP)
    parser.add_argument("--identity", dest="identities", action="append", default=[],
                        metavar="NAME", help=IDENTITY_HELP)
    options = parser.parse_args(argv)
    sys.exit(run_worker(create_worker_app(), burst=options.burst,
                        identities=tuple(options.identities)))
