"""There is always an owner: two owners demoting or removing each other at the same moment,
each on its own connection and thread, leave one (broadside.core.people: one guarded
statement, behind an advisory lock on PostgreSQL)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import sessionmaker

from broadside.core import people
from broadside.core.errors import DomainError
from broadside.core.models import Owner
from tests.helpers import wait_until
from webapp.extensions import db


def owners() -> list[str]:
    db.session.expire_all()
    return list(db.session.scalars(select(Owner.email).where(Owner.role == "owner")))


# PostgreSQL only: SQLite runs one writing statement at a time, so two demotions cannot
# overlap there (the other tests of this file run on both).
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_the_second_of_two_demotions_waits_then_finds_the_last_owner(app, backend, make_person):
    """Deterministic on PostgreSQL: the first demotion holds its transaction open; the
    second is seen waiting on the lock (pg_locks), then refused once the first commits.
    Without the lock its statement would not wait (another row) and its snapshot would
    still count the first as an owner: both would pass and nobody would be left."""
    ana, bo = make_person("owner", "ana@example.com").id, make_person("owner", "bo@example.com").id
    Session = sessionmaker(bind=db.engine)
    first, second, watcher = Session(), Session(), Session()
    outcome: dict[str, object] = {}

    def demote_bo() -> None:
        try:
            outcome["bo"] = people.change_role(second, bo, "admin")
        except DomainError as exc:
            outcome["bo"] = exc
        finally:
            second.close()

    try:
        assert people.change_role(first, ana, "admin", commit=False) == ("owner", "admin")
        thread = threading.Thread(target=demote_bo)
        thread.start()
        wait_until(lambda: watcher.scalar(text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")) == 1,
            message="the second demotion waits for the first")
        assert "bo" not in outcome
        first.commit()
        thread.join(20)
        assert isinstance(outcome["bo"], people.LastOwner), outcome
    finally:
        first.close()
        watcher.close()
    assert owners() == ["bo@example.com"]


def _act(Session, barrier: threading.Barrier, results: list[object], move: str,
         target: int) -> None:
    session = Session()
    try:
        barrier.wait(10)
        if move == "remove":
            results.append(people.remove(session, target))
        else:
            results.append(people.change_role(session, target, "viewer"))
    except DomainError as exc:
        results.append(exc)
    finally:
        session.close()


@pytest.mark.parametrize("moves", [("remove", "remove"), ("demote", "remove"),
                                   ("demote", "demote")])
def test_two_owners_acting_on_each_other_at_once_leave_one(app, backend, make_person, moves):
    Session = sessionmaker(bind=db.engine)
    for _ in range(5):
        ana = make_person("owner", "ana@example.com").id
        bo = make_person("owner", "bo@example.com").id
        barrier = threading.Barrier(2)
        results: list[object] = []
        threads = [threading.Thread(target=_act, args=(Session, barrier, results, moves[0], bo)),
                   threading.Thread(target=_act, args=(Session, barrier, results, moves[1], ana))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sum(isinstance(r, people.LastOwner) for r in results) == 1, results
        assert len(owners()) == 1
        db.session.execute(Owner.__table__.delete())
        db.session.commit()
