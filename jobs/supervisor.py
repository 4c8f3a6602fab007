"""Every stream the worker process serves, a thread each (jobs.stream), and the maintenance
that follows them.

`Streams` starts a stream per identity served and follows the identities at each maintenance
tick, keyed by id (`SendingIdentity.key`: a rename is a change, not a new identity): a new
identity gets its stream (when serving all of them), a deleted one's stream stops, one whose
`stream_settings` (transport, pace, cap, name, webhook secret, its account's ceiling, DKIM
selector and key) changed
is stopped and started again on the new values (its successor waits for the old one's lease:
never two senders; the old one's slice ends after its send in flight), and one that ended by
itself (its lease lost, an error) is started again. Each stream says the values it runs on beside its lease
(broadside.delivery.streams.record_running), so the System page shows them. A paused identity keeps its
stream: its jobs hold while paused (jobs.tasks) and go on when it is resumed. In burst mode
(tests) the streams are those served at the start, each ending when its queues are empty.

`Maintenance` is one thread for all streams: every MAINTENANCE_EVERY_S it runs each serving
stream's tick (orphan repair, jobs for its broadcasts, schedules and messages, its rate),
then follows the identities. Redis or the database not answering skips the rest of the round
with one line, not one per stream.
"""

from __future__ import annotations

import logging
import threading
import time

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from broadside.delivery.identities import service as identity_service
from broadside.delivery.identities.service import SendingIdentity
from jobs.app import WorkerApp
from jobs.database import db
from jobs.stream import Stream

log = logging.getLogger("broadside.worker")

MAINTENANCE_EVERY_S = 5.0
# Redis or the database unreachable: the other streams' ticks would only wait to fail too.
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OperationalError)


class Streams:
    """The worker's streams: `fixed` names the identities served (`--identity`), None: all."""

    def __init__(self, app: WorkerApp, *, burst: bool, fixed: list[SendingIdentity] | None) -> None:
        self.app = app
        self.burst = burst
        self.fixed = None if fixed is None else {identity.key for identity in fixed}
        self.running: dict[str, Stream] = {}
        self.retired: list[Stream] = []  # stopped, perhaps still finishing their slice
        self.lock = threading.Lock()
        self.closed = False

    def start(self, identities: list[SendingIdentity]) -> None:
        with self.lock:
            for identity in identities:
                self._start(identity)

    def _start(self, identity: SendingIdentity) -> None:
        stream = Stream(self.app, identity, burst=self.burst)
        self.running[identity.key] = stream
        stream.start()

    def _retire(self, key: str) -> None:
        stream = self.running.pop(key)
        stream.stop()
        self.retired.append(stream)

    def follow(self, identities: list[SendingIdentity]) -> None:
        """Bring the running streams in line with the live identities (see the docstring)."""
        live = {i.key: i for i in identities if self.fixed is None or i.key in self.fixed}
        with self.lock:
            if self.closed:
                return
            for key, stream in list(self.running.items()):
                identity = live.get(key)
                if identity is None:
                    log.info("identity %s is gone: stopping its stream", stream.identity.name)
                    self._retire(key)
                elif identity.stream_settings != stream.identity.stream_settings and not self.burst:
                    log.info("identity %s changed: its stream starts again on the new settings",
                             identity.name)
                    self._retire(key)
            self.retired = [stream for stream in self.retired if stream.is_alive()]
            if self.burst:
                return
            for key, identity in live.items():
                ended = self.running.get(key)
                if ended is not None and ended.is_alive():
                    continue
                if ended is not None:
                    log.warning("the stream of identity %s had ended (exit %s); starting it again",
                                identity.name, ended.exit_code)
                self._start(identity)

    def tick(self) -> None:
        """Each serving stream's maintenance, one after the other."""
        with self.lock:
            streams = list(self.running.values())
        for stream in streams:
            try:
                stream.tick()
            except UNREACHABLE as exc:
                log.warning("maintenance skipped: %s", exc)
                return
            except (RedisError, SQLAlchemyError) as exc:
                log.warning("maintenance of the stream %s skipped: %s", stream.identity.key, exc)
            except Exception:  # one stream's surprise must not end every stream's maintenance
                log.exception("maintenance of the stream %s failed", stream.identity.key)

    def ended(self) -> bool:
        with self.lock:
            return not any(s.is_alive() for s in [*self.running.values(), *self.retired])

    def exit_code(self) -> int:
        with self.lock:
            return max((s.exit_code or 0 for s in [*self.running.values(), *self.retired]), default=0)

    def stop_all(self) -> list[Stream]:
        """Ask every stream to stop (warm) and follow no more; returns them, to be joined."""
        with self.lock:
            self.closed = True
            streams = [*self.running.values(), *self.retired]
        for stream in streams:
            stream.stop()
        return streams

    def abandon_all(self) -> None:
        """A cold stop: no stream starts another send, and every lease is released."""
        with self.lock:
            self.closed = True
            streams = [*self.running.values(), *self.retired]
        for stream in streams:
            stream.abandon()


class Maintenance(threading.Thread):
    """Every MAINTENANCE_EVERY_S: each stream's tick, then the identities followed."""

    def __init__(self, app: WorkerApp, streams: Streams) -> None:
        super().__init__(name="broadside-maintenance", daemon=True)
        self.app = app
        self.streams = streams
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(MAINTENANCE_EVERY_S):
            started = time.monotonic()
            self.streams.tick()
            if self.done.is_set():
                return
            try:
                identities = identity_service.all_identities(db.session(), self.app.config)
                db.session.commit()
                self.streams.follow(identities)
            except (RedisError, SQLAlchemyError) as exc:
                log.warning("the identities could not be followed: %s", exc)
            except Exception:  # said, and tried again at the next tick
                log.exception("the identities could not be followed")
            finally:
                db.session.remove()
            took = time.monotonic() - started
            if took > MAINTENANCE_EVERY_S:
                log.warning("maintenance took %.1f s for %d streams", took, len(self.streams.running))
