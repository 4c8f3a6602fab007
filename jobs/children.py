"""The worker's child processes: one per other identity's stream (jobs.worker).

Started with the parent's configuration in their environment, followed at each maintenance
tick (a new identity gets one, a deleted one loses its own, one that died is started again),
stopped with the parent on SIGTERM, and killed with it on SIGKILL (PR_SET_PDEATHSIG), so no
stream outlives the worker that owns it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import threading

from broadside.core.config import ENV_VARS
from broadside.delivery.identities import service as identity_service
from jobs.app import WorkerApp

log = logging.getLogger("broadside.worker")


class Children:
    """The child processes serving the other identities' streams: started, followed (new
    identities get one, deleted ones lose theirs, one that died is started again) and
    stopped with this process."""

    def __init__(self, app: WorkerApp, burst: bool, *, follow_all: bool, fixed: list[int]) -> None:
        self.app = app
        self.burst = burst
        self.follow_all = follow_all
        self.fixed = set(fixed)
        self.procs: dict[int, subprocess.Popen] = {}
        self.lock = threading.Lock()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        config = self.app.config
        env.update({name: str(config[name]) for name in ENV_VARS if config.get(name) not in (None, "")})
        env["BROADSIDE_INSTANCE_PATH"] = self.app.instance_path
        return env

    def start(self, identity_id: int, name: str) -> None:
        with self.lock:
            proc = self.procs.get(identity_id)
            if proc is not None and proc.poll() is None:
                return
            argv = [sys.executable, "-m", "jobs", "--identity", name]
            if self.burst:
                argv.append("--burst")
            self.procs[identity_id] = subprocess.Popen(argv, env=self._env(), preexec_fn=_die_with_parent)
            log.info("started the worker for identity %s (pid %d)", name, self.procs[identity_id].pid)

    def start_fixed(self, names: dict[int, str]) -> None:
        for identity_id, name in names.items():
            self.start(identity_id, name)

    def follow(self, session) -> None:
        """Every live identity has a running child (when serving all), none is left for a
        deleted one; a child that exited is started again (not in burst mode)."""
        wanted = {i.id: i.name for i in identity_service.all_identities(session, self.app.config)
                  if i.id is not None and (self.follow_all or i.id in self.fixed)}
        session.commit()
        with self.lock:
            gone = [i for i in self.procs if i not in wanted]
        for identity_id in gone:
            self._stop(identity_id)
        if self.burst:
            return
        for identity_id, name in wanted.items():
            self.start(identity_id, name)

    def _stop(self, identity_id: int, timeout: float = 30.0) -> None:
        with self.lock:
            proc = self.procs.pop(identity_id, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # a deploy: the send in flight finishes, then it hands over
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def stop_all(self) -> None:
        if self.burst:
            for proc in list(self.procs.values()):
                try:
                    proc.wait(600)  # burst children end when their queues are empty
                except subprocess.TimeoutExpired:
                    proc.kill()
        for identity_id in list(self.procs):
            self._stop(identity_id)


def _die_with_parent() -> None:
    """In a child, before exec: SIGTERM when the parent dies (even by SIGKILL), so no child
    outlives its worker (Linux's PR_SET_PDEATHSIG; elsewhere children are stopped on exit)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass
