"""The import at scale: an exact row count before the first row is written (quoted newlines
and blank rows counted as the importer reads them), duplicates found across batches without
holding the file's addresses in memory, a re-import that writes nothing when nothing changed,
and the API's large imports answered 202 and run by the worker, at a million rows."""

from __future__ import annotations

import io
import threading

import pytest
from sqlalchemy import event, func, select, text

from broadside.audience import lists as lists
from broadside.audience.transfer import importer, stored
from broadside.audience.transfer import report as import_report
from broadside.core.models import Event, Import, ImportRejection, Subscriber, Subscription
from tests.webapp.import_steps import last_import, upload
from webapp.extensions import db


@pytest.fixture
def weekly(app):
    return lists.create_list(db.session, "Weekly")


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(importer, "BATCH_SIZE", 3)


def count(model) -> int:
    return db.session.scalar(select(func.count()).select_from(model))


FILE = (b"email,name,city\n"
        b"a@example.com,A,Paris\n"            # 2
        b'"b@example.com","B\nTwo lines",Rome\n'  # 3-4: one record
        b"\n"                                  # 5: blank, not a row
        b"c@example.com,C,Oslo\n"              # 6
        b"d@example.com,D,Kiel\n"              # 7
        b"e@example.com,E,\xc3\x89vian\n"      # 8
        b"A@Example.com,A again,Lyon\n"        # 9: duplicate of line 2, another batch
        b"nope,X,Y\n"                          # 10
        b"f@example.com,F,Graz\n")             # 11


def test_the_total_is_counted_exactly_before_the_first_row_and_progress_uses_it(
        small_batches, app, weekly):
    with io.BytesIO(FILE) as stream:
        record = importer.receive_upload(db.session, weekly.id, "p.csv", stream,
                                         importer.import_dir(app.instance_path), 10**6,
                                         consent="opted_in")
    path = stored.spool(db.session, record.id, importer.import_path(app.instance_path, record.id))
    assert importer.claim(db.session, record.id)
    seen: list[tuple[int, int | None, int | None]] = []

    def on_batch(tally: importer.Tally) -> None:
        state = import_report.progress(db.session, record.id, app.instance_path)
        seen.append((state.record.processed_rows, state.record.total_rows, state.percent))

    importer.run_import(db.session, record.id, path, on_batch)
    record = last_import()
    assert (record.total_rows, record.processed_rows) == (8, 8)
    assert (record.imported, record.rejected) == (6, 2)
    assert all(total == 8 for _, total, _ in seen)
    assert [(done, percent) for done, _, percent in seen[:2]] == [(3, 37), (6, 75)]
    rejected = dict(db.session.execute(
        select(ImportRejection.line, ImportRejection.reason)
        .where(ImportRejection.kind == "rejected")).all())
    assert rejected[9] == "duplicate of line 2 (the same address)"
    assert set(rejected) == {9, 10}
    assert not path.with_suffix(".seen").exists()  # the scratch file goes with the run


def test_a_reimport_of_unchanged_people_writes_no_subscriber_and_refreshes_changed_ones(
        small_batches, logged_in_client, weekly):
    content = ("email,name,city,plan\n" + "".join(
        f"p{i}@example.com,P {i},Zürich,{'gold' if i % 2 else ''}\n" for i in range(7))).encode()
    upload(logged_in_client, weekly.id, content)
    assert last_import().imported == 7
    db.session.execute(Subscriber.__table__.update().where(Subscriber.email == "p3@example.com")
                       .values(attributes={"city": "Bern", "vip": "yes"}, name="Old"))
    db.session.commit()
    events = count(Event)
    written: list[int] = []
    postgres = db.engine.dialect.name == "postgresql"

    def versions() -> dict[str, tuple[str, ...]]:
        # PostgreSQL: each row's version (a write, even of the same values, makes a new one
        # with its own xmin and place, and a lock marks its xmax); the UPDATE is inside a
        # larger statement there.
        return {email: rest for email, *rest in db.session.execute(text(
            "SELECT email, xmin::text, xmax::text, ctid::text FROM subscribers"))}

    def watch(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("UPDATE SUBSCRIBERS"):
            written.append(cursor.rowcount)

    before = versions() if postgres else {}
    db.session.commit()
    event.listen(db.engine, "after_cursor_execute", watch)
    try:
        upload(logged_in_client, weekly.id, content)
    finally:
        event.remove(db.engine, "after_cursor_execute", watch)
    if postgres:
        after = versions()
        written = [sum(after[email] != version for email, version in before.items())]
        db.session.commit()
    record = last_import()
    assert (record.imported, record.updated) == (0, 7)
    assert sum(written) == 1  # p3 only: everyone else already had exactly these values
    p3 = db.session.scalar(select(Subscriber).where(Subscriber.email == "p3@example.com"))
    assert (p3.name, p3.attributes) == ("P 3", {"city": "Zürich", "vip": "yes", "plan": "gold"})
    p2 = db.session.scalar(select(Subscriber).where(Subscriber.email == "p2@example.com"))
    assert p2.attributes == {"city": "Zürich"}  # an empty cell adds nothing
    assert count(Event) == events and count(Subscription) == 7


@pytest.fixture
def api_inline_limit(app_config):
    app_config["API_IMPORT_INLINE_BYTES"] = 100


def test_a_large_api_import_is_answered_202_and_the_worker_imports_it(
        api_inline_limit, client, api_headers, weekly, run_worker_burst):
    content = b"email,name\n" + b"".join(b"q%d@example.com,Q %d\n" % (i, i) for i in range(40))
    content += b"bad,Bad\n"
    response = client.post(f"/api/lists/{weekly.id}/import", headers=api_headers,
                           data={"file": (io.BytesIO(content), "q.csv"), "consent": "opted_in"},
                           content_type="multipart/form-data")
    assert response.status_code == 202, response.json
    import_id = response.json["import_id"]
    assert response.json == {"import_id": import_id, "status": "queued",
                             "status_url": f"/api/imports/{import_id}"}
    assert response.headers["Location"].endswith(f"/api/imports/{import_id}")
    assert count(Subscriber) == 0  # nothing written in the request
    waiting = client.get(f"/api/imports/{import_id}", headers=api_headers).json
    assert (waiting["status"], waiting["total_rows"], waiting["processed_rows"]) == (
        "queued", None, 0)

    assert run_worker_burst() == 0

    done = client.get(f"/api/imports/{import_id}", headers=api_headers)
    assert done.status_code == 200
    assert {k: done.json[k] for k in ("status", "imported", "rejected_count", "total_rows",
                                      "processed_rows", "error")} == {
        "status": "done", "imported": 40, "rejected_count": 1, "total_rows": 41,
        "processed_rows": 41, "error": None}
    assert done.json["rejected"][0]["line"] == 42 and done.json["rejected"][0]["row"] == [
        "bad", "Bad"]
    assert count(Subscription) == 40
    assert client.get("/api/imports/999999", headers=api_headers).status_code == 404
    assert db.session.get(Import, import_id).status == "done"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_small_api_import_keeps_its_200_answer(client, api_headers, weekly):
    response = client.post(f"/api/lists/{weekly.id}/import", headers=api_headers,
                           data={"file": (io.BytesIO(b"email\na@example.com\n"), "a.csv")},
                           content_type="multipart/form-data")
    assert response.status_code == 200 and response.json["status"] == "done"
    assert response.json["imported"] == 1


def test_statistics_are_refreshed_as_the_tables_grow_and_once_when_nothing_is_added(
        small_batches, monkeypatch, logged_in_client, weekly):
    refreshed: list[int] = []
    refresh = importer.refresh_statistics

    def counted(session) -> None:
        refreshed.append(last_import().processed_rows)
        refresh(session)

    monkeypatch.setattr(importer, "refresh_statistics", counted)
    content = b"email,name\n" + b"".join(b"g%d@example.com,G %d\n" % (i, i) for i in range(13))
    upload(logged_in_client, weekly.id, content)  # 5 batches of 3: before 1, 2 and 4
    assert last_import().imported == 13
    assert refreshed == [0, 3, 9]
    refreshed.clear()
    upload(logged_in_client, weekly.id, content)  # nobody added: before the first only
    assert (last_import().imported, last_import().updated) == (0, 13)
    assert refreshed == [0]
    refreshed.clear()
    upload(logged_in_client, weekly.id, content.replace(b"g12@", b"h12@"))  # the last batch adds
    assert last_import().imported == 1
    assert refreshed == [0]


@pytest.mark.parametrize("backend", ["postgresql"])  # the one-statement batch is PostgreSQL's
def test_an_address_a_sign_up_takes_while_a_new_batch_is_written_is_added_once(
        small_batches, logged_in_client, weekly):
    """PostgreSQL writes a batch of only new addresses in one statement; a sign-up that
    creates one of them after the batch was looked up makes it fail, and the batch is then
    written as any other: the sign-up's person is kept (not refreshed: they were not known
    when the known people were) and put on the list, counted imported."""
    other = db.engine.connect()
    raced: list[bool] = []
    statements: list[str] = []

    def sign_up_meanwhile(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)
        if conn is not other and not raced and "WITH found AS" in statement:
            raced.append(True)
            other.execute(Subscriber.__table__.insert().values(
                email="r1@example.com", name="Signed up", attributes={"via": "form"},
                soft_bounce_count=0))
            other.commit()

    content = b"email,name\n" + b"".join(b"r%d@example.com,R %d\n" % (i, i) for i in range(3))
    event.listen(db.engine, "after_cursor_execute", sign_up_meanwhile)
    try:
        upload(logged_in_client, weekly.id, content)
    finally:
        event.remove(db.engine, "after_cursor_execute", sign_up_meanwhile)
        other.close()
    assert raced and any(s.startswith("ROLLBACK TO SAVEPOINT") for s in statements)
    record = last_import()
    assert (record.imported, record.updated, record.rejected) == (3, 0, 0)
    people = dict(db.session.execute(select(Subscriber.email, Subscriber.name)).all())
    assert people == {"r0@example.com": "R 0", "r1@example.com": "Signed up",
                      "r2@example.com": "R 2"}
    assert count(Subscription) == 3
    assert sorted(db.session.scalars(select(Event.subscriber_id)
                                     .where(Event.kind == "subscribed"))) == sorted(
        db.session.scalars(select(Subscriber.id)))


# ---------------------------------------------------------------- reading one batch ahead

def test_reading_ahead_hands_over_every_item_in_order_and_then_stops():
    with importer.ReadAhead(iter(range(500))) as items:
        assert list(items) == list(range(500))


def test_a_reading_error_is_raised_where_the_item_would_have_been():
    def numbers():
        yield 1
        yield 2
        raise OSError("the disk went away")

    got: list[int] = []
    with pytest.raises(OSError, match="the disk went away"), importer.ReadAhead(numbers()) as items:
        for item in items:
            got.append(item)
    assert got == [1, 2]


def test_leaving_early_stops_the_reader_without_reading_the_rest():
    pulled: list[int] = []
    closed: list[bool] = []

    def numbers():
        try:
            for n in range(10_000):
                pulled.append(n)
                yield n
        finally:
            closed.append(True)  # what closes the file a reading generator holds

    reader = importer.ReadAhead(numbers())
    with pytest.raises(RuntimeError, match="the database failed"), reader as items:
        for item in items:
            if item == 3:
                raise RuntimeError("the database failed")
    assert not reader._thread.is_alive()
    assert closed == [True]
    # One item ahead: the one handed over, one in the queue, one waiting to be put.
    assert len(pulled) <= 7


def reader_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "import-reader"]


def no_scratch_file_left(app) -> bool:
    """The import's store of the addresses read so far (`SeenAddresses`) goes with the run."""
    path = importer.import_path(app.instance_path, last_import().id)
    return not path.with_suffix(".seen").exists()


def test_a_batch_that_fails_to_write_fails_the_import_and_ends_its_reader(
        small_batches, monkeypatch, app, logged_in_client, weekly):
    write = importer.write_batch
    calls: list[int] = []

    def second_fails(session, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        return write(session, *args, **kwargs)

    monkeypatch.setattr(importer, "write_batch", second_fails)
    content = b"email,name\n" + b"".join(b"w%d@example.com,W %d\n" % (i, i) for i in range(12))
    upload(logged_in_client, weekly.id, content)
    record = last_import()
    assert record.status == "failed" and "unexpected error" in record.error
    assert "RuntimeError" not in record.error  # Python's words are for the worker's log
    assert (record.imported, record.processed_rows) == (3, 3)  # the first batch, committed
    assert count(Subscription) == 3
    assert reader_threads() == []
    assert no_scratch_file_left(app)


def test_a_file_that_fails_to_read_midway_keeps_the_batches_before_and_fails(
        small_batches, monkeypatch, app, logged_in_client, weekly):
    real = importer.records

    def breaks_after_seven(path, **options):
        for n, record in enumerate(real(path, **options)):
            if n == 7:
                raise OSError("read error")
            yield record

    monkeypatch.setattr(importer, "records", breaks_after_seven)
    content = b"email,name\n" + b"".join(b"f%d@example.com,F %d\n" % (i, i) for i in range(12))
    upload(logged_in_client, weekly.id, content)
    record = last_import()
    assert record.status == "failed" and "unexpected error" in record.error
    assert "OSError" not in record.error  # Python's words are for the worker's log
    assert (record.imported, record.processed_rows) == (6, 6)  # two whole batches of three
    assert count(Subscription) == 6
    assert reader_threads() == []
    assert no_scratch_file_left(app)
