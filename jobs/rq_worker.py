"""RQ's job loop run in a stream's own thread (jobs.stream): `BroadsideWorker`.

RQ's `Worker.work()` is written for a process's main thread: it installs SIGINT and SIGTERM
handlers (which Python allows only there), times jobs out with SIGALRM, and, idle, blocks in
one BLPOP for minutes, woken only by a signal's exception. Many streams share one process
here, so this subclass
- installs no signal handler: the main thread owns the signals (jobs.worker) and asks every
  stream to stop (`stop_soon`);
- times a job out with RQ's own `TimerDeathPenalty` (a timer thread, here a daemon one, so a
  cold shutdown's exit never waits for a job's timeout) instead of SIGALRM;
- listens in short BLPOPs (`LISTEN_S`), checking between two whether it was asked to stop, so
  an idle stream obeys a deploy's SIGTERM within a second; its heartbeat and state are written
  to Redis only when they change or are due, not once a second per stream.
A busy stream finishes its job first: the runtime's `stop` (set with it) ends a slice after
the send in flight.
"""

from __future__ import annotations

import threading
import time

from redis.client import Pipeline
from rq import SimpleWorker
from rq.job import Job
from rq.queue import Queue
from rq.timeouts import TimerDeathPenalty
from rq.worker import WorkerStatus

from broadside.core.logs import log_context
from jobs.database import db


class ThreadDeathPenalty(TimerDeathPenalty):
    """A job's timeout in a stream's thread: RQ's timer, as a daemon thread."""

    def new_timer(self) -> threading.Timer:
        timer = super().new_timer()
        timer.daemon = True
        return timer


LISTEN_S = 1  # one BLPOP's wait: how long an idle stream takes to notice a stop
HEARTBEAT_EVERY_S = 15.0  # RQ's worker key lives worker_ttl + 60 s (480 s by default)


class BroadsideWorker(SimpleWorker):
    """Runs every job with the job id on every log line, and closes the job's database session
    after it (whatever the job left open)."""

    death_penalty_class = ThreadDeathPenalty

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._beat_at = float("-inf")

    def perform_job(self, job: Job, queue: Queue) -> bool:
        try:
            with log_context(job_id=job.id):
                return super().perform_job(job, queue)
        finally:
            db.session.remove()

    def stop_soon(self) -> None:
        """Stop after the job in progress (at once when idle, within LISTEN_S)."""
        self._stop_requested = True

    @property
    def stop_asked(self) -> bool:
        """Whether a stop was asked (of this worker, or of RQ's loop by `rq shutdown`): the
        one place RQ's own flag is read."""
        return self._stop_requested

    def _install_signal_handlers(self) -> None:
        pass  # the main thread owns the signals and calls stop_soon (jobs.worker)

    def procline(self, message: str) -> None:
        pass  # one process, many streams: no stream names the process

    def dequeue_job_and_maintain_ttl(self, timeout: int | None,
                                     max_idle_time: int | None = None) -> tuple[Job, Queue] | None:
        if timeout is None:  # burst: one look at the queues, no waiting
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        # RQ's own loop waits through any number of empty BLPOPs without looking at
        # `_stop_requested`: one short listen at a time, until a job or a stop.
        while not self._stop_requested:
            found = super().dequeue_job_and_maintain_ttl(LISTEN_S, max_idle_time=LISTEN_S)
            if found is not None:
                return found
        return None

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        if timeout is None and pipeline is None and time.monotonic() - self._beat_at < HEARTBEAT_EVERY_S:
            return  # beaten lately: a listen each second need not beat each second
        self._beat_at = time.monotonic()
        super().heartbeat(timeout, pipeline)

    def set_state(self, state: str, pipeline: Pipeline | None = None) -> None:
        if pipeline is None and state == WorkerStatus.IDLE and self._state == state:
            return  # idle still: written once, not at every listen
        super().set_state(state, pipeline)

    def unsubscribe(self) -> None:
        # RQ's own order (UNSUBSCRIBE, then stop the listening thread) races: when the reply
        # reaches the thread before the main thread stops it, the thread, no longer subscribed,
        # waits 60 s for a subscription; since redis-py 8.2 the stop() joins it, so a deploy's
        # SIGTERM went unobeyed for a minute. Stopping first, the reply ends the thread's loop.
        thread = self.pubsub_thread
        if thread is None:
            return
        pubsub = self.pubsub
        assert pubsub is not None  # set with the thread, in subscribe()
        thread.stop(timeout=0)  # clears its run flag; joined below, briefly
        try:
            pubsub.unsubscribe()
        finally:
            thread.join(timeout=1)
            pubsub.close()
