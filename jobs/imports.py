"""The background CSV import: one job per Import row, on the `imports` queue.

Safe to import (no app, no connections at import time). The worker pushes an app context
before running any job. The Import row is claimed queued -> running with a guarded UPDATE, so
a duplicated or retried job does nothing; the uploaded file is deleted when the run ends.
"""

from __future__ import annotations

from flask import current_app

from webapp.extensions import db
from webapp.subscribers import importer


def run_import_job(import_id: int) -> None:
    path = importer.import_path(current_app.instance_path, import_id)
    try:
        importer.process(db.session, import_id, path)
    finally:
        db.session.remove()
