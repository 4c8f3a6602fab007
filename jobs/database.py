"""The worker's database handle, without Flask: a thread-scoped session on its engine.

`db.session()` is this thread's session (scoped_session's default scope is the thread): each
stream's thread has its own (its jobs', jobs.stream), the maintenance thread and each of the
webhook runner's threads (jobs.webhooks_out) their own, so no two threads ever share a
session or a transaction; `db.session.remove()` closes the calling
thread's, as Flask-SQLAlchemy's `db.session` does in the web app. The
worker binds it once it knows its database (`jobs.worker.run_worker`): to an engine of its
own (`python -m jobs`, `broadside.core.db.make_engine`), or to the web app's engine when the web app
runs the worker (`flask --app webapp worker`, the tests). Binding again (another app in the
same process, as tests do) closes the sessions of the previous binding first.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlalchemy.orm import scoped_session, sessionmaker


class WorkerDatabase:
    def __init__(self) -> None:
        self.session = scoped_session(sessionmaker())
        self._engine: Engine | None = None

    def bind(self, engine: Engine) -> None:
        if engine is self._engine:
            return
        self.session.remove()
        self.session.configure(bind=engine)
        self._engine = engine


db = WorkerDatabase()
