"""A test's namespace is removed whole at its end: RQ's own job keys too, which live under
RQ's prefix (`rq:job:<ns>-<hex>`), and have no TTL while queued."""

from __future__ import annotations

from broadside.delivery.queues import BROADCASTS, Jobs, unique_name
from tests.helpers import forget_namespace


def test_forgetting_a_namespace_removes_its_queued_and_failed_jobs_and_no_one_elses(redis_client, namespace):
    ours, theirs = Jobs(redis_client, namespace), Jobs(redis_client, namespace + "-other")
    try:
        ours.enqueue_slice(1)
        theirs.enqueue_slice(2)
        (queued,) = ours.queue(BROADCASTS).get_jobs()
        (kept,) = theirs.queue(BROADCASTS).get_jobs()
        failed = ours.queue("later").enqueue("jobs.tasks.nothing", job_id=unique_name(namespace))
        failed.set_status("failed")  # a failed job's hash lives a year
        redis_client.set(f"rq:results:{queued.id}", b"x")
        assert redis_client.ttl(queued.key) == -1  # what would stay behind: no TTL

        forget_namespace(redis_client, namespace)

        for job in (queued, failed):
            assert not redis_client.exists(job.key, f"rq:results:{job.id}")
        assert not list(redis_client.scan_iter(f"*{namespace}:*"))
        assert redis_client.exists(kept.key)  # another namespace's job is left alone
        assert theirs.queue(BROADCASTS).get_job_ids() == [kept.id]
    finally:
        forget_namespace(redis_client, namespace + "-other")
        assert not redis_client.exists(kept.key)
