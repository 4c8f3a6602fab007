"""Apps a test makes for itself, beside the `app` fixture's: released when the test is done.

An app holds pooled database connections (its own engine, and the System checks' engine),
and a Redis client. Left to the garbage collector, a PostgreSQL connection is finalised in
whatever test runs then, as a ResourceWarning there (the suite makes warnings errors)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from flask import Flask

from webapp import create_app
from webapp.extensions import db


def release(app: Flask) -> None:
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
    if "doctor_engine" in app.extensions:
        app.extensions["doctor_engine"].dispose()
    if "broadside_redis" in app.extensions:
        app.extensions["broadside_redis"].close()


@contextmanager
def own_app(config: dict) -> Iterator[Flask]:
    """A second app from `config`, inside its app context, released on the way out."""
    app = create_app(config, environ={})
    try:
        with app.app_context():
            yield app
    finally:
        release(app)
