"""The worker's own small Flask app: configuration, the database handle and Redis, nothing of the
web (no blueprints, templates, forms, logins or Alembic), so the sending process stays small.

`create_worker_app` reads the configuration exactly as `webapp.create_app` does
(broadside.config: defaults, `.env`, the environment; the same instance folder and secret key)
and logs through broadside.logs with the same redaction. `python -m jobs` and the
`broadside-worker` script run the worker with it; `flask --app webapp worker` still works and
runs the same code inside the web app.

`schema_state` tells whether the database is at the migrations' head by reading the revision
files' `revision`/`down_revision` assignment lines instead of importing Alembic (about 10 MB
of the worker's memory); only those lines are parsed (a whole file's syntax tree cost the
worker 1.2 MB of memory it never gave back).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask
from flask.logging import default_handler
from redis import Redis
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from broadside import models  # noqa: F401 - registers the tables with the metadata
from broadside.config import REPO_ROOT, instance_folder, load_config, process_environment
from broadside.db import db
from broadside.logs import configure_logging

MIGRATIONS = REPO_ROOT / "migrations" / "versions"


def create_worker_app(config: Mapping[str, Any] | None = None, *,
                      environ: Mapping[str, str] | None = None) -> Flask:
    """The worker's app: defaults, then the environment (and `.env`), then `config`."""
    overrides = dict(config or {})
    app = Flask("broadside.worker", instance_path=instance_folder(overrides.pop("INSTANCE_PATH", None)),
                root_path=str(REPO_ROOT))
    app.config.update(load_config(Path(app.instance_path),
                                  process_environment() if environ is None else environ, overrides))
    db.init_app(app)
    app.extensions["broadside_redis"] = Redis.from_url(app.config["REDIS_URL"], socket_timeout=5,
                                                       socket_connect_timeout=2)
    configure_logging(app.config)
    app.logger.removeHandler(default_handler)
    return app


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
