"""What the worker runs on: its configuration, its database engine and Redis (`WorkerApp`), and
nothing of the web: no Flask, blueprints, templates, forms, logins or Alembic, so the sending
process stays small (Flask, Werkzeug, Click and Flask-SQLAlchemy were ~5 MB of it).

`create_worker_app` reads the configuration exactly as `webapp.create_app` does
(broadside.core.config: defaults, `.env`, the environment; the same instance folder and secret key),
opens the database as Flask-SQLAlchemy opens it for the web app (`broadside.core.db.make_engine`)
and logs through broadside.core.logs with the same redaction. On PostgreSQL its pool keeps
five connections and opens more while more threads need one (each stream's thread and the
maintenance thread hold at most one at a time, so the connections in use never exceed the
threads; the pool's default cap of fifteen would make a sixteenth sending stream wait), unless
SQLALCHEMY_ENGINE_OPTIONS says otherwise. `python -m jobs` and the
`broadside-worker` script run the worker with it; `flask --app webapp worker` still works and
runs the same code with the web app's configuration, engine and Redis (`from_flask`).

`schema_state` tells whether the database is at the migrations' head by reading the revision
files' `revision`/`down_revision` assignment lines instead of importing Alembic (about 10 MB
of the worker's memory); only those lines are parsed (a whole file's syntax tree cost the
worker 1.2 MB of memory it never gave back).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis import Redis
from sqlalchemy import make_url, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from broadside.core import models  # noqa: F401 - registers the tables with the metadata
from broadside.core.config import REPO_ROOT, instance_folder, load_config, process_environment
from broadside.core.db import make_engine
from broadside.core.logs import configure_logging

MIGRATIONS = REPO_ROOT / "migrations" / "versions"


@dataclass(frozen=True)
class WorkerApp:
    """The worker's configuration, instance folder, database engine and Redis client."""

    config: dict[str, Any]
    instance_path: str
    engine: Engine
    redis: Redis


def create_worker_app(config: Mapping[str, Any] | None = None, *,
                      environ: Mapping[str, str] | None = None) -> WorkerApp:
    """The worker's app: defaults, then the environment (and `.env`), then `config`."""
    overrides = dict(config or {})
    instance_path = str(instance_folder(overrides.pop("INSTANCE_PATH", None)))
    settings = load_config(Path(instance_path),
                           process_environment() if environ is None else environ, overrides)
    configure_logging(settings)
    return WorkerApp(
        config=dict(settings),
        instance_path=instance_path,
        engine=make_engine(_thread_pool(settings), instance_path),
        redis=Redis.from_url(settings["REDIS_URL"], socket_timeout=5, socket_connect_timeout=2),
    )


def _thread_pool(settings: Mapping[str, Any]) -> Mapping[str, Any]:
    """PostgreSQL's pool without a cap of its own (see the module's docstring)."""
    if make_url(settings["SQLALCHEMY_DATABASE_URI"]).get_backend_name() != "postgresql":
        return settings
    options = dict(settings.get("SQLALCHEMY_ENGINE_OPTIONS") or {})
    options.setdefault("max_overflow", -1)
    return {**settings, "SQLALCHEMY_ENGINE_OPTIONS": options}


def from_flask(app: Any) -> WorkerApp:
    """The web app's configuration, engine and Redis, for running the worker inside it
    (`flask --app webapp worker`, the tests). Duck-typed: the worker never imports Flask."""
    with app.app_context():
        engine = app.extensions["sqlalchemy"].engine
    return WorkerApp(config=dict(app.config), instance_path=app.instance_path, engine=engine,
                     redis=app.extensions["broadside_redis"])


def _assigned(source: str, name: str) -> Any:
    # Only the module-level lines that assign `name` are parsed (the whole file's tree would
    # stay in the worker's memory as freed-but-kept arenas).
    lines = re.findall(rf"^{name}\b[^=\n]*=[ \t]*(?:\([^)]*\)|\[[^\]]*\]|[^\n]*)", source,
                       flags=re.MULTILINE)
    for node in ast.parse("\n".join(lines)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name:
            return ast.literal_eval(value)
    raise ValueError(f"no {name} assigned")


def migration_heads(folder: Path = MIGRATIONS) -> set[str]:
    """The revisions no other revision names as its parent (one, unless branches are open)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in folder.glob("*.py"):
        source = path.read_text()
        revisions.add(str(_assigned(source, "revision")))
        down = _assigned(source, "down_revision")
        if isinstance(down, (tuple, list)):
            parents.update(str(d) for d in down)
        elif down is not None:
            parents.add(str(down))
    return revisions - parents


def schema_state(connection: Connection) -> tuple[bool, str, str]:
    """(at head, the database's revision(s), the head(s)), read without Alembic."""
    heads = migration_heads()
    try:
        current = {row[0] for row in connection.execute(text("SELECT version_num FROM alembic_version"))}
    except SQLAlchemyError:
        connection.rollback()
        current = set()
    return current == heads, ", ".join(sorted(current)) or "no schema", ", ".join(sorted(heads))
