"""The lean worker's start: the CSV importer and the bulk actions are loaded
only when a dead worker left one unfinished, and such a bulk action is still queued again."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from broadside.core.models import BulkAction
from broadside.delivery.queues import IMPORTS
from jobs.worker import recover_interrupted
from webapp import REPO_ROOT
from webapp.extensions import db, get_jobs


def test_a_worker_that_only_sends_holds_neither_the_importer_nor_the_bulk_actions():
    probe = ("import sys, jobs.worker, jobs.tasks; "
             "print(sorted(m for m in ('jobs.imports', 'jobs.bulk', 'broadside.audience.transfer.importer') "
             "if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_an_unfinished_bulk_action_is_queued_again_and_a_finished_one_is_not(app):
    queue = get_jobs().queue(IMPORTS)
    queue.empty()
    done = BulkAction(action="add", status="done")
    running = BulkAction(action="add", status="running")
    db.session.add_all([done, running])
    db.session.commit()
    rt = SimpleNamespace(jobs=get_jobs())
    recover_interrupted(db.session(), rt)
    assert [job.args for job in queue.get_jobs()] == [[running.id]]
    running.status = "done"
    db.session.commit()
    queue.empty()
    get_jobs().clear_marker("bulk", running.id)
    recover_interrupted(db.session(), rt)
    assert queue.get_jobs() == []
