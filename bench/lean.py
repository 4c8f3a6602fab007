"""The lean worker (issue 19 point 6): its peak memory while sending a large broadcast, and what
it imports.

A list of N generated people (fixed names, no randomness needed) gets one broadcast pressed
"send" (`send_broadcast`, as the page does); the worker, started as the Procfile starts it
(`python -m jobs`), sends it to the bench's discarding SMTP server with SEND_DELAY_MS=0.
Sending a whole 1,000,000 takes 15+ minutes here, so the figure is taken over the first
`sends` messages of the N-recipient broadcast (N = 1,000,000, sends = 100,000; quick:
N = 40,000, sends = 30,000), then SIGTERM: the peak RSS (VmHWM) over that run, and the growth slope, the
RSS after `sends` sends minus the RSS after 10,000. A bounded worker's RSS stops growing
once its caches are warm: the slope says whether the rest of the million would add more.

Also shown, on the rest of the same broadcast right after: the worker started the old way (the
whole web app, as `flask --app webapp worker` runs it) over 10,000 sends (what is left, if
fewer: the lean run's last slice goes a little past its `sends`). LEAN_PEOPLE,
LEAN_SENDS, LEAN_EARLY and LEAN_TRACE (print the RSS along the way) are for development.
Measured on SQLite and on PostgreSQL (where the worker also holds its driver, psycopg), the
same way; the old way on SQLite only. LEAN_BACKENDS=sqlite,postgresql picks them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from harness import (
    LAUNCH_WORKER,
    ROOT,
    Bench,
    WorkerProcess,
    broadcast_state,
    populate,
    press_send,
    proc_status,
    steer,
)
from report import Figure, below
from smtp_sink import Sink

PEAK_TARGET_MB = 80.0
SLOPE_TARGET_MB = 5.0  # RSS after `sends` minus after 10,000: bounded, not growing with the list
EARLY = int(os.environ.get("LEAN_EARLY", 10_000))
LEAN_COMMAND = [sys.executable, "-m", "jobs"]


class Worker(WorkerProcess):
    """A worker subprocess started with `command` (the lean `python -m jobs` by default), its
    peak RSS watched, and its RSS read at given send counts."""

    def __init__(self, env: dict[str, str], log_path: Path, burst: bool,
                 command: list[str] | None = None) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # closed in wait()/stop()
        argv = list(command or LEAN_COMMAND) + (["--burst"] if burst else [])
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.peak_mb = 0.0
        self._watching = True
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def rss(self) -> float:
        return proc_status(self.proc.pid, "VmRSS") or 0.0


def start_worker(bench: Bench, database_url: str, *, smtp_url: str, delay_ms: int = 0,
                 burst: bool = True, label: str = "lean", lean: bool = True) -> Worker:
    """The worker as the Procfile starts it (`python -m jobs`), or the old way (`lean=False`:
    the web app built first, what `flask --app webapp worker` does)."""
    env = bench.env(database_url, SEND_DELAY_MS=str(delay_ms), SMTP_URL=smtp_url)
    log = bench.workdir / f"{label}-{uuid.uuid4().hex[:6]}.log"
    command = None if lean else [sys.executable, "-c", LAUNCH_WORKER]
    worker = Worker(env, log, burst, command)
    bench.processes.append(worker.proc)
    return worker


def sample_run(worker: Worker, sink: Sink, marks: list[int], timeout: float) -> dict[int, float]:
    """The worker's RSS as the sink passes each mark (sends accepted)."""
    seen: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    for mark in sorted(marks):
        while sink.count() < mark and worker.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        if sink.count() < mark:
            how = "still running, no more sends" if worker.alive() else "exited"
            raise RuntimeError(f"{sink.count():,} sends, not {mark:,} (the worker {how}); log:\n"
                               + worker.output[-3000:])
        seen[mark] = worker.rss()
        if os.environ.get("LEAN_TRACE"):
            print(f"  {mark:>8,} sends: RSS {seen[mark]:.1f} MB, peak {worker.peak_mb:.1f} MB", flush=True)
    return seen


def memory(bench: Bench, quick: bool, backend: str = "sqlite") -> list[Figure]:
    # The lean run's sends, then EARLY more for the old way.
    people = int(os.environ.get("LEAN_PEOPLE", 40_000 if quick else 1_000_000))
    sends = int(os.environ.get("LEAN_SENDS", min(people - EARLY, 100_000)))
    old_way = backend == "sqlite"
    url = bench.sqlite_url("lean") if backend == "sqlite" else bench.postgres_url("lean")
    app = bench.app(url)
    started = time.monotonic()
    list_id = populate(app, people, {"Lean": people}, prefix="lean", width=7, city=False)["Lean"]
    broadcast_id, snapshot_s = press_send(app, list_id, enqueue=False)
    steer(app, broadcast_id, "pause")
    made = time.monotonic() - started
    discard = Sink("discard")
    try:
        steer(app, broadcast_id, "resume")
        worker = start_worker(bench, url, smtp_url=discard.url, burst=False, label="lean")
        idle = 0.0
        while discard.count() == 0 and worker.alive():
            idle = max(idle, worker.rss())
            time.sleep(0.05)
        began = time.monotonic()
        trace = sorted({1_000, 2_000, 5_000, EARLY, sends // 2, sends} if os.environ.get("LEAN_TRACE")
                       else {EARLY, sends // 2, sends})
        marks = sample_run(worker, discard, trace, timeout=sends / 50 + 600)
        seconds = time.monotonic() - began
        worker.terminate()
        peak = worker.peak_mb
        # SIGTERM lets the slice under way end, so the lean worker sends a little past `sends`
        # (which defaults to people - EARLY): the old way measures what is left, at most EARLY.
        old_sends = min(EARLY, people - discard.count())
        discard.reset()

        if old_way:
            # Then the old way, briefly, on the rest of the same broadcast: the web app in the worker.
            steer(app, broadcast_id, "pause")
            steer(app, broadcast_id, "resume")
            old = start_worker(bench, url, smtp_url=discard.url, burst=False, label="heavy", lean=False)
            old_marks = sample_run(old, discard, [old_sends], timeout=600)
            old.terminate()
            old_peak = old.peak_mb
    finally:
        state = broadcast_state(app, broadcast_id)
        if state["status"] in ("queued", "sending", "paused"):
            steer(app, broadcast_id, "cancel")
        discard.close()
    slope = marks[sends] - marks[EARLY]
    name = "SQLite" if backend == "sqlite" else "PostgreSQL"
    where = (f"{name}, a {people:,}-recipient broadcast (made in {made:.0f} s, snapshot "
             f"{snapshot_s:.1f} s), discarding server, SEND_DELAY_MS=0")
    figures = [
        Figure("lean", f"worker peak RSS over {sends:,} sends of {people:,}, {name}", peak, "MB",
               f"< {PEAK_TARGET_MB:.0f} MB", below(peak, PEAK_TARGET_MB),
               f"VmHWM of `python -m jobs`; {where}; {sends / seconds:,.0f} msg/s; RSS before "
               f"the first send {idle:.1f} MB, after {EARLY:,} {marks[EARLY]:.1f} MB, after "
               f"{sends // 2:,} {marks[sends // 2]:.1f} MB, after {sends:,} {marks[sends]:.1f} MB"),
        Figure("lean", f"worker RSS growth, {sends:,} sends minus {EARLY:,}, {name}", slope, "MB",
               f"< {SLOPE_TARGET_MB:.0f} MB", below(slope, SLOPE_TARGET_MB),
               f"what the other {people - sends:,} sends of this broadcast would add at this "
               f"(linear, so pessimistic) slope: "
               f"{max(slope, 0) * (people - sends) / max(sends - EARLY, 1):.1f} MB"),
    ]
    if old_way:
        figures.append(Figure("lean", f"old way (web app in the worker) peak RSS over {old_sends:,} sends",
                              old_peak, "MB",
               detail=f"RSS at {old_sends:,} sends {old_marks[old_sends]:.1f} MB; the same broadcast, "
                      "what `flask --app webapp worker` runs"))
    return figures


def imports() -> list[Figure]:
    """What the lean worker's modules pull in (a fresh interpreter): its RSS once imported,
    and none of the web stack's modules."""
    probe = ("import sys; import jobs.worker, jobs.tasks; "
             "rss = [l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1]; "
             "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'webapp', 'alembic', "
             "'botocore', 'wtforms', 'flask_wtf', 'flask_login', 'flask_migrate', 'mako', 'flask', "
             "'flask_sqlalchemy', 'werkzeug', 'click'}); "
             "print(int(rss) / 1024, ','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    rss, heavy = float(out[0]), (out[1] if len(out) > 1 else "")
    return [Figure("lean", "worker modules imported: RSS, web stack loaded", rss, "MB",
                   "no web stack", not heavy,
                   f"jobs.worker + jobs.tasks in a fresh interpreter; web modules loaded: {heavy or 'none'}")]


def run(bench: Bench, quick: bool) -> list[Figure]:
    figures = imports()
    for backend in os.environ.get("LEAN_BACKENDS", "sqlite,postgresql").split(","):
        figures += memory(bench, quick, backend)
    return figures


if __name__ == "__main__":
    from report import table

    quick = "--quick" in sys.argv
    bench = Bench()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        print(table(run(bench, quick)))
    finally:
        bench.close()
