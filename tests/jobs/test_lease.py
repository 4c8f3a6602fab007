import time

from broadside.delivery.lease import Lease


def test_only_one_holder_and_release(app, namespace):
    redis = app.extensions["broadside_redis"]
    first, second = Lease(redis, namespace, "a"), Lease(redis, namespace, "b")
    assert first.try_acquire()
    assert not second.try_acquire()
    assert second.holder() == "a"
    assert first.renew() and not second.renew()
    second.release()  # not the holder: changes nothing
    assert first.still_mine()
    first.release()
    assert second.try_acquire() and second.still_mine()


def test_lease_of_a_dead_holder_expires(app, namespace, monkeypatch):
    import broadside.delivery.lease

    monkeypatch.setattr(broadside.delivery.lease, "TTL_MS", 200)
    redis = app.extensions["broadside_redis"]
    dead, next_worker = Lease(redis, namespace, "dead"), Lease(redis, namespace, "next")
    assert dead.try_acquire()
    deadline = time.monotonic() + 5
    while not next_worker.try_acquire():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert not dead.still_mine()
