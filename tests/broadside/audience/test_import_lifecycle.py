"""An import's status moves only along its transition table, each move guarded."""

from __future__ import annotations

from broadside.audience import lists
from broadside.audience.transfer import importer, lifecycle
from broadside.core.models import Import
from webapp.extensions import db


def status(import_id: int) -> str:
    db.session.expire_all()
    return db.session.get_one(Import, import_id).status


def test_an_import_moves_once_and_a_late_failure_leaves_a_finished_one_alone(app):
    list_id = lists.create_list(db.session, "Weekly").id
    record = Import(list_id=list_id, status=lifecycle.INITIAL.value)
    db.session.add(record)
    db.session.commit()

    assert importer.claim(db.session, record.id)
    assert not importer.claim(db.session, record.id)  # a duplicated job does nothing
    assert not lifecycle.move(db.session, record.id, "asked")  # not asking: refused
    assert lifecycle.move(db.session, record.id, "finish")
    db.session.commit()
    assert status(record.id) == "done"

    importer.fail_import(db.session, record.id, "too late")
    assert status(record.id) == "done" and db.session.get_one(Import, record.id).error is None
    assert not lifecycle.move(db.session, record.id, "requeue")


def test_a_failure_keeps_the_owners_sentence_and_the_moment(app):
    list_id = lists.create_list(db.session, "Weekly").id
    record = Import(list_id=list_id, status=lifecycle.INITIAL.value)
    db.session.add(record)
    db.session.commit()
    importer.fail_import(db.session, record.id, "x" * 3000)
    db.session.expire_all()
    failed = db.session.get_one(Import, record.id)
    assert failed.status == "failed" and failed.error == "x" * 2000
    assert failed.finished_at is not None
