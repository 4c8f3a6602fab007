"""`flask --app webapp worker`: the sending worker run with the web app's configuration, engine
and Redis. Registered by the worker package (pyproject's `flask.commands` entry point), so
`webapp` never imports `jobs`; only the flask CLI loads this module, never `python -m jobs`."""

from __future__ import annotations

import sys

import click
from flask import current_app
from flask.cli import with_appcontext

from jobs.app import from_flask
from jobs.worker import BURST_HELP, IDENTITY_HELP, run_worker


@click.command("worker")
@click.option("--burst", is_flag=True, help=BURST_HELP)
@click.option("--identity", "identities", multiple=True, metavar="NAME", help=IDENTITY_HELP)
@with_appcontext
def worker_command(burst: bool, identities: tuple[str, ...]) -> None:
    """Run the sending worker: one paced stream per identity, each a thread of this process
    (RQ, concurrency 1 each)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    sys.exit(run_worker(from_flask(app), burst=burst, identities=identities))
