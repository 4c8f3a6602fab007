"""Every Redis key Broadside or RQ writes carries the installation's namespace, so two
installations can share one Redis (`broadside.delivery.queues`). Watched on a private
redis-server, where every command seen is ours: RQ's global `rq:workers` and `rq:queues`
and its `rq:worker:<uuid>` keys used to be written with no namespace at all."""

from __future__ import annotations

import threading

import pytest

from broadside.delivery.queues import owns_key
from tests.helpers import make_list, start_broadcast
from webapp.extensions import db, get_jobs

# Commands that only read: their keys need not be checked.
READS = {"PING", "GET", "EXISTS", "TTL", "PTTL", "LLEN", "LRANGE", "HGET", "HGETALL", "HMGET",
         "SMEMBERS", "SCARD", "SISMEMBER", "ZRANGE", "ZCARD", "ZRANGEBYSCORE", "TYPE", "SCAN",
         "INFO", "CLIENT", "SELECT", "HELLO", "XRANGE", "XREVRANGE", "EVALSHA", "EVAL", "SCRIPT",
         "SUBSCRIBE", "UNSUBSCRIBE", "PSUBSCRIBE", "MULTI", "EXEC", "WATCH", "UNWATCH", "TIME",
         "BLPOP", "BRPOP", "LPOP", "ZSCORE", "KEYS", "MONITOR", "DISCARD", "HEXISTS", "STRLEN"}


@pytest.fixture
def app_config(app_config, private_redis):
    app_config["REDIS_URL"] = private_redis.url
    return app_config


def _watch(private_redis) -> tuple[list[str], threading.Event, threading.Thread]:
    commands: list[str] = []
    started, stop = threading.Event(), threading.Event()

    def listen() -> None:
        client = private_redis.client()
        with client.monitor() as monitor:
            started.set()
            while not stop.is_set():
                try:
                    commands.append(monitor.next_command()["command"])
                except Exception:  # the connection closed under it at the end
                    return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    started.wait(5)
    return commands, stop, thread


def test_every_key_written_during_a_send_carries_the_namespace(
    app, namespace, smtp_server, run_worker_burst, private_redis
):
    commands, stop, thread = _watch(private_redis)
    broadcast = start_broadcast(app, make_list(db.session, 3))
    get_jobs().enqueue_evaluation()
    assert run_worker_burst() == 0
    assert sorted(smtp_server.recipients()) == [f"reader{i:05d}@example.com" for i in range(3)]
    with private_redis.client() as client:
        client.set(f"{namespace}:end-of-watch", 1)  # the last command the monitor must see
        for _ in range(200):
            if any("end-of-watch" in c for c in commands):
                break
            threading.Event().wait(0.05)
        stop.set()
        for other in client.client_list():
            if "O" in other["flags"]:  # the monitor's connection: closing it ends the thread
                client.client_kill_filter(_id=other["id"])
        left = [key.decode() for key in client.scan_iter("*")]
    thread.join(5)

    written = []
    for command in commands:
        name, *args = command.split(" ")
        if name.upper() in READS or not args:
            continue
        written.append((name.upper(), args[0]))
    assert ("SADD", f"{namespace}:rq:workers") in written  # the worker was seen registering
    assert any(name == "HSET" and key.startswith(f"rq:job:{namespace}-") for name, key in written)
    strangers = sorted({f"{name} {key}" for name, key in written if not owns_key(namespace, key)})
    assert strangers == []
    assert [key for key in left if not owns_key(namespace, key)] == []
    assert broadcast.id


def test_owns_key_tells_apart_a_namespace_that_begins_with_another():
    assert owns_key("broadside", "broadside:queued:slice:1")
    assert owns_key("broadside", "rq:queue:broadside:broadcasts")
    assert owns_key("broadside", "rq:job:broadside-" + "a" * 32)
    assert owns_key("broadside", "rq:wip:broadside:broadcasts:identity:3")
    assert not owns_key("broadside", "broadside-staging:queued:slice:1")
    assert not owns_key("broadside", "rq:job:broadside-staging-" + "a" * 32)
    assert not owns_key("broadside", "rq:workers")
