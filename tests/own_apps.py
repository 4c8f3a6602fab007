"""Apps a test makes for itself, beside the `app` fixture's: released when the test is done.

An app holds pooled database connections (its own engine, and the System checks' engine),
and a Redis client. Left to the garbage collector, a PostgreSQL connection is finalised in
whatever test runs then, as a ResourceWarning there (the suite makes warnings errors)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from flask import Flask
from jinja2.bccache import Bucket, BytecodeCache
from werkzeug.routing import Rule

from webapp import create_app
from webapp.extensions import db


class _SharedBytecode(BytecodeCache):
    """The pages' templates compiled once per test process, not once per test: each test
    makes its own app, and each app's Jinja environment would parse and compile every page it
    renders again (a third of a page test's time). Jinja's own cache, in memory: a bucket's key
    is the template's name and its source's checksum, so an edited template compiles afresh."""

    def __init__(self) -> None:
        self._code: dict[tuple[str, str | None], bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        code = self._code.get((bucket.key, bucket.checksum))
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._code[(bucket.key, bucket.checksum)] = bucket.bytecode_to_string()


_BYTECODE = _SharedBytecode()


def share_url_builders() -> None:
    """Each route's url_for builder made once per test process, not once per app. Werkzeug
    writes every rule's builder as Python source and compiles it when the rule joins an app's
    url map: ~300 routes, ~0.2 s of every test's app. The builder depends only on the rule's
    parts (`_trace`) and defaults; for rules without defaults (nearly all) it is kept by
    those parts and handed to the next app's rule as it is. Werkzeug's own function, untouched
    otherwise; if a Werkzeug release renames it, nothing is shared and nothing breaks."""
    original = getattr(Rule, "_compile_builder", None)
    if original is None or getattr(original, "shared", False):
        return
    built: dict[tuple, Callable] = {}

    def _compile_builder(self: Rule, append_unknown: bool = True) -> Callable:
        if self.defaults:
            return original(self, append_unknown)
        key = (self.rule, tuple(self._trace), append_unknown)
        if key not in built:
            built[key] = original(self, append_unknown)
        return built[key]

    _compile_builder.shared = True  # type: ignore[attr-defined]
    Rule._compile_builder = _compile_builder  # type: ignore[method-assign]


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
    app.jinja_env.bytecode_cache = _BYTECODE
    try:
        with app.app_context():
            yield app
    finally:
        release(app)
