"""`doctor`'s worker line, with sending identities: ready only when a worker holds the lease of
every live identity's stream (each stream's own lease in Redis, as the System page reads it),
naming the identities nobody serves."""

from __future__ import annotations

from broadside.delivery.identities.service import all_identities
from broadside.delivery.lease import Lease
from tests.helpers import make_identity
from webapp.doctor.report import run_checks
from webapp.extensions import db


def worker_line(app):
    return next(check for check in run_checks(app, smtp=False) if check.name == "worker")


def test_the_worker_line_names_each_identity_no_worker_serves(app, redis_client, namespace):
    make_identity("Product", "smtp://127.0.0.1:2525", 100)
    make_identity("Shop", "smtp://127.0.0.1:2526", 100, email="shop@product.example")
    default = Lease(redis_client, namespace, identity="box:4242:abc123")
    assert default.try_acquire()

    check = worker_line(app)
    assert check.ok is False
    assert "box:4242:abc123 holds the lease" in check.summary
    assert check.summary.endswith("no worker serves the stream of “Product”, “Shop”")
    assert "python -m jobs --identity NAME" in check.advice

    product, shop = all_identities(db.session, app.config)[1:]
    assert Lease(redis_client, namespace, identity="box:4242:def456", stream=product.key).try_acquire()
    check = worker_line(app)
    assert check.ok is False and check.summary.endswith("no worker serves the stream of “Shop”")

    assert Lease(redis_client, namespace, identity="other:77:aa11", stream=shop.key).try_acquire()
    check = worker_line(app)
    assert check.ok is True
    assert check.summary.endswith("every identity's stream is served (3)")


def test_without_other_identities_the_worker_line_is_the_default_streams(app, redis_client, namespace):
    assert worker_line(app).ok is False
    assert Lease(redis_client, namespace, identity="box:4242:abc123").try_acquire()
    check = worker_line(app)
    assert check.ok is True and "every identity" not in check.summary
