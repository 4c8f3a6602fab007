"""Jobs travel as JSON: write access to Redis is not code execution in the worker."""

from __future__ import annotations

import json
import pickle
import zlib

from rq import Queue

from broadside.delivery.queues import BROADCASTS
from webapp.extensions import get_jobs


class _OpensAFile:
    """What a pickle payload can do when unpickled: here, create a file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_jobs_are_enqueued_as_json(app):
    jobs = get_jobs()
    jobs.enqueue_slice(4242)
    (job,) = jobs.queue(BROADCASTS).get_jobs()
    raw = app.extensions["broadside_redis"].hget(job.key, "data")
    func, _instance, args, _kwargs = json.loads(zlib.decompress(raw) if raw[:1] == b"x" else raw)
    assert (func, args) == ("jobs.tasks.send_broadcast_slice", [4242])


def test_a_pickled_job_planted_in_redis_runs_nothing(app, tmp_path, run_worker_burst):
    marker = tmp_path / "pwned"
    # Someone with write access to Redis queues a job the way RQ's default serializer would.
    planted = Queue(get_jobs().queue_name(BROADCASTS), connection=app.extensions["broadside_redis"])
    job = planted.enqueue("builtins.print", "hello", result_ttl=0)
    payload = pickle.dumps(("builtins.print", None, (_OpensAFile(str(marker)),), {}))
    app.extensions["broadside_redis"].hset(job.key, "data", zlib.compress(payload))
    run_worker_burst()
    assert not marker.exists()
