"""The background CSV import: one job per Import row, on the `imports` queue.

Safe to import (no app, no connections at import time). Uploads are read from the database
(any host's worker runs any import) into a scratch file under the runtime's instance folder.
The Import row is claimed queued -> running with a guarded UPDATE, so a
duplicated or retried job does nothing; the upload's bytes are deleted when the run ends. An
import that asks its people to confirm then queues their confirmation emails (`importer.ask`),
in this job: they go out on the transactional queue, paced like all mail. The API's import of a
small file (at most API_IMPORT_INLINE_BYTES) writes its rows in the request and queues this job
for that second part alone; a larger one is stored and run by this job like the page's (the API
answers 202).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from broadside.audience.signup import Links
from broadside.audience.transfer import importer, lifecycle, stored
from broadside.core.models import Import
from jobs import runtime
from jobs.database import db


def run_import_job(import_id: int) -> None:
    rt = runtime.get()
    path = importer.import_path(rt.instance_path, import_id)
    session = db.session()
    try:
        importer.process(session, import_id, path)  # nothing unless it is still queued
        importer.ask(session, import_id, Links(rt.config["SECRET_KEY"], rt.config["BASE_URL"]),
                     rt.jobs)
    finally:
        db.session.remove()


def recover_interrupted_imports(session: Session, rt: runtime.Runtime) -> int:
    """Re-queue imports a dead worker left `queued`, `running` or `asking`; returns how many.

    Call it only when the worker starts, while it holds the sending lease: then no import can
    really be running. Re-running is safe (every write is an upsert, each confirmation is
    claimed); the rows imported before the interruption are counted as "updated" the second
    time. An import whose file is gone is marked failed with a message saying to upload it
    again (one `asking` needs no file: its rows are in).
    """
    count = 0
    stuck = session.execute(
        select(Import.id, Import.status)
        .where(Import.status.in_([s.value for s in lifecycle.UNFINISHED]))
    ).all()
    for import_id, status in stuck:
        if status == lifecycle.ASKING:
            rt.jobs.enqueue_import(import_id)
            count += 1
            continue
        if not stored.has_upload(session, import_id,
                                 importer.import_path(rt.instance_path, import_id)):
            importer.fail_import(session, import_id, "The import was interrupted and its file "
                                                     "is gone; upload the file again.")
            continue
        lifecycle.move(session, import_id, "requeue")  # a queued one stays queued
        session.commit()
        rt.jobs.enqueue_import(import_id)
        count += 1
    return count
