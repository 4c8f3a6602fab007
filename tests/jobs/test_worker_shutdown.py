"""The worker's shutdown does not wait on RQ's command listener: a deploy's SIGTERM is obeyed
in a second, whichever thread the Redis server's UNSUBSCRIBE reply reaches first.

RQ stops its listening thread after unsubscribing. When the reply was read before the stop
(a busy machine: the main thread preempted between the two), the thread, subscribed to
nothing, waited 60 s for a subscription, and redis-py 8.2's stop() joins it: the worker
stalled after its last slice. This forces that interleaving on real Redis."""

from __future__ import annotations

import threading
import time

from rq import Queue

from jobs.worker import BroadsideWorker


def test_the_command_listener_ends_with_the_unsubscribe_even_when_its_reply_comes_first(
        redis_client, namespace):
    worker = BroadsideWorker([Queue(f"{namespace}:shutdown", connection=redis_client)],
                             connection=redis_client)
    worker.subscribe()
    pubsub, listener = worker.pubsub, worker.pubsub_thread
    assert pubsub is not None and listener is not None and listener.is_alive()
    sent = pubsub.unsubscribe

    def unsubscribe_then_let_the_reply_be_read(*args):
        # The main thread "preempted" right after sending: the listener reads the reply first.
        answer = sent(*args)
        deadline = time.monotonic() + 10
        while pubsub.subscribed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pubsub.subscribed, "the listener never read the UNSUBSCRIBE reply"
        return answer

    pubsub.unsubscribe = unsubscribe_then_let_the_reply_be_read  # type: ignore[method-assign]
    shutdown = threading.Thread(target=worker.unsubscribe, daemon=True)
    shutdown.start()
    shutdown.join(10)
    assert not shutdown.is_alive(), "the worker's shutdown waits on its command listener"
    listener.join(5)
    assert not listener.is_alive(), "the listener outlived the worker's shutdown"
