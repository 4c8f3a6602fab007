"""What one worker process shares between jobs: the lease, the pacer, the transport, flags.

Set up once by `jobs.worker.run_worker`; the RQ job functions in `jobs.tasks` read it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from broadside.hourly import HourlyCap
from broadside.lease import Lease
from broadside.queues import Jobs
from jobs.pacing import Pacer


@dataclass
class Runtime:
    lease: Lease
    pacer: Pacer
    transport: Any
    hourly: HourlyCap
    config: dict[str, Any]
    jobs: Jobs
    instance_path: str
    stop: threading.Event = field(default_factory=threading.Event)
    running_broadcast: int | None = None
    running_automations: bool = False  # a slice of automation messages is running
    # Connection failures in a row, across recipients: past a bound the channel is down.
    connection_failures: int = 0
    # Rows per second the last batch of a broadcast achieved (sizes the next claim).
    rows_per_second: float = 0.0


current: Runtime | None = None


def get() -> Runtime:
    if current is None:
        raise RuntimeError("jobs run inside `flask --app webapp worker`, which sets up the runtime")
    return current
