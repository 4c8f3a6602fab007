"""CSV import: every rejection reason, whole-file errors, upserts that never re-activate
anyone, idempotent re-imports, and the background job with its progress bar."""

from pathlib import Path

import pytest
from sqlalchemy import func, select

from broadside.audience import lists as lists
from broadside.audience.transfer import importer, stored
from broadside.audience.transfer import report as import_report
from broadside.audience.transfer.csvfile import records
from broadside.audience.transfer.people import shorten
from broadside.core.models import Event, Import, ImportRejection, Subscriber, Subscription
from broadside.delivery.queues import IMPORTS
from tests.helpers import wait_until
from tests.webapp.import_steps import last_import, statuses, upload
from webapp.extensions import db, get_jobs


def count(model) -> int:
    return db.session.scalar(select(func.count()).select_from(model))


# Tests of what the importer reads and reports, the same on either engine.
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])


@pytest.fixture
def weekly(app):
    return lists.create_list(db.session, "Weekly")


BAD_FILE = (
    "email,name,city\n"                                   # 1
    "ann@example.com,Ann,Paris\n"                         # 2
    "not-an-address,Bob,Rome\n"                           # 3
    ",No Email,Oslo\n"                                    # 4
    "ANN@Example.com,Ann again,Lyon\n"                    # 5 duplicate of line 2
    + "x" * 310 + "@example.com,Long,Oslo\n"              # 6 email too long
    "carl@example.com," + "N" * 201 + ",Bern\n"           # 7 name too long
    "dora@example.com,Dora," + "c" * 1001 + "\n"          # 8 attribute too long
).encode() + b"eve@example.com,\xe9ve,Caf\xe9\n" + (     # 9 not UTF-8 (Latin-1)
    b"finn@example.com,Finn,Kiel,extra\n"                  # 10 more fields than the header
    b'"gus@example.com","Gus\nMultiline",Graz\n'           # 11-12 one record over two lines
    b"\n"                                                  # 13 blank: ignored
    b"hal@example.com,Hal\n"                               # 14 missing trailing column: fine
)


@SQLITE_ONLY
def test_every_bad_row_is_rejected_with_its_line_reason_and_row_and_the_rest_imports(
        logged_in_client, weekly):
    response = upload(logged_in_client, weekly.id, BAD_FILE)
    assert response.status_code == 303
    record = last_import()
    assert (record.status, record.imported, record.updated, record.rejected,
            record.warnings) == ("done", 4, 0, 7, 1)
    rows = {r.line: r for r in db.session.scalars(
        select(ImportRejection).where(ImportRejection.kind == "rejected"))}
    reasons = {line: r.reason for line, r in rows.items()}
    assert sorted(reasons) == [3, 4, 5, 6, 8, 9, 10]
    assert "not a valid email address" in reasons[3]
    assert reasons[4] == "missing email address"
    assert reasons[5] == "duplicate of line 2 (the same address)"
    assert reasons[6] == "email address longer than 320 characters"
    assert reasons[8] == "the value in column 'city' is longer than 1000 characters"
    assert "not valid UTF-8" in reasons[9]
    assert reasons[10] == "the row has 4 fields but the header has 3"
    # Each rejected row is kept as uploaded, bad bytes replaced so the owner sees where.
    assert rows[3].fields == ["not-an-address", "Bob", "Rome"]
    assert rows[4].fields == ["", "No Email", "Oslo"]
    assert rows[9].fields == ["eve@example.com", "\ufffdve", "Caf\ufffd"]
    assert rows[10].fields == ["finn@example.com", "Finn", "Kiel", "extra"]
    [warning] = db.session.scalars(select(ImportRejection).where(ImportRejection.kind == "warning"))
    assert (warning.line, warning.reason) == (7, "name shortened to 200 characters (it had 201)")
    people = {s.email: s for s in db.session.scalars(select(Subscriber))}
    assert set(people) == {"ann@example.com", "carl@example.com", "gus@example.com",
                           "hal@example.com"}
    assert people["carl@example.com"].name == "N" * 200
    assert people["ann@example.com"].attributes == {"city": "Paris"}
    assert people["gus@example.com"].name == "Gus Multiline"
    assert people["hal@example.com"].attributes == {}
    assert set(statuses(weekly.id).values()) == {"active"}

    summary = logged_in_client.get(response.headers["Location"])
    assert "The import is finished" in summary.text and "duplicate of line 2" in summary.text
    assert "line 7: name shortened to 200 characters" in summary.text
    assert "finn@example.com" in summary.text and "extra:</span> Kiel" not in summary.text
    assert "hx-trigger" not in summary.text  # finished: nothing polls


@SQLITE_ONLY
def test_the_rejected_rows_csv_is_the_file_as_uploaded_and_imports_again_once_fixed(
        logged_in_client, weekly):
    content = (b'email;name;city\r\n'
               b'ann@example;"Ann, Jr";"Paris; France"\r\n'   # quoted delimiter and comma
               b'bob@example.com;B\xf6b;Wien\r\n'               # Latin-1, not UTF-8
               b'cy@example\r\n'                                # missing columns
               b'dee@example.com;=1+1;Rome\r\n')                # fine: imported
    upload(logged_in_client, weekly.id, content)
    record = last_import()
    assert (record.imported, record.rejected) == (1, 3)
    download = logged_in_client.get(f"/subscribers/imports/{record.id}/rejections.csv")
    assert download.headers["Content-Disposition"].startswith("attachment")
    assert download.text.splitlines() == [
        "rejected_line;rejected_reason;email;name;city",
        f"2;{reason(record.id, 2)};ann@example;Ann, Jr;Paris; France".replace(
            "Paris; France", '"Paris; France"'),
        '3;"the line is not valid UTF-8 text (save the file as ""CSV UTF-8"")";'
        "bob@example.com;B\ufffdb;Wien",
        f"4;{reason(record.id, 4)};cy@example",
    ]

    # One edit: fix the values in place, upload the downloaded file as it is.
    fixed = (download.text.replace("ann@example;", "ann@example.com;")
             .replace("B\ufffdb", "Böb").replace("cy@example", "cy@example.com"))
    assert upload(logged_in_client, weekly.id, fixed.encode()).status_code == 303
    again = last_import()
    assert (again.imported, again.rejected, again.header["columns"]) == (
        3, 0, ["email", "name", "city"])
    people = {p.email: p for p in db.session.scalars(select(Subscriber))}
    assert people["ann@example.com"].attributes == {"city": "Paris; France"}  # no report columns
    assert people["bob@example.com"].name == "Böb"
    assert people["dee@example.com"].name == "=1+1"


def reason(import_id: int, line: int) -> str:
    return db.session.scalar(select(ImportRejection.reason).where(
        ImportRejection.import_id == import_id, ImportRejection.line == line))


@SQLITE_ONLY
def test_what_is_kept_of_rejected_rows_is_bounded_and_the_page_says_so(
        logged_in_client, weekly, monkeypatch):
    monkeypatch.setattr(import_report, "MAX_KEPT_ROWS", 3)
    monkeypatch.setattr(importer, "MAX_KEPT_ROWS", 3)
    long_name = "L" * 300
    rows = [f"bad{i},x" for i in range(5)] + [f"p{i}@example.com,{long_name}" for i in range(4)]
    rows.append("bad," + "y" * 4100)  # a row too long to keep
    upload(logged_in_client, weekly.id, ("email,name\n" + "\n".join(rows)).encode())
    record = last_import()
    assert (record.rejected, record.warnings, record.imported) == (6, 4, 4)
    kept = db.session.execute(select(ImportRejection.kind, func.count()).where(
        ImportRejection.import_id == record.id).group_by(ImportRejection.kind)).all()
    assert dict(kept) == {"rejected": 3, "warning": 3}
    page = logged_in_client.get(f"/subscribers/imports/{record.id}").text
    assert "This file had 6 rejected rows; the first 3 are kept" in page
    assert "Showing the first 3 of 4 (the first 3 are kept)" in page
    assert len(logged_in_client.get(
        f"/subscribers/imports/{record.id}/rejections.csv").text.splitlines()) == 4

    monkeypatch.setattr(import_report, "MAX_KEPT_ROWS", 10)
    monkeypatch.setattr(importer, "MAX_KEPT_ROWS", 10)
    upload(logged_in_client, weekly.id, ("email,name\n" + "\n".join(rows)).encode())
    record = last_import()
    too_long = db.session.scalars(select(ImportRejection).where(
        ImportRejection.import_id == record.id, ImportRejection.line == 11)).one()
    assert too_long.fields is None and "not repeated here" in too_long.reason


def test_a_long_name_is_shortened_at_a_character_boundary():
    assert shorten("Zoë" + "e\u0301" * 3, 4) == "Zoë"      # an accent stays with its letter
    assert shorten("ab👍🏽cd", 3) == "ab"                    # a skin tone stays with its emoji
    assert shorten("ab👩\u200d💻", 4) == "ab"               # so does a joined emoji
    assert shorten("Ann  Lee", 4) == "Ann"
    assert shorten("short", 200) == "short"


def test_a_line_over_1_mb_is_rejected_without_being_read_in(tmp_path):
    # Straight to the reader: the test client leaks its spooled upload file past 500 KB.
    path = tmp_path / "long.csv"
    path.write_bytes(b"email,notes\nann@example.com,short\nbob@example.com," + b"x" * 1_100_000
                     + b"\ncy@example.com,short\n")
    assert [(line, reason) for line, _, reason in records(path)] == [
        (2, None), (3, "the line is longer than 1 MB"), (4, None)]


def test_bom_semicolons_crlf_and_quoted_fields_are_read(logged_in_client, weekly):
    content = "\ufeffEmail;Name;Plan\r\nzoe@example.com;\"Zoe; Jr\";gold\r\n".encode()
    assert upload(logged_in_client, weekly.id, content).status_code == 303
    zoe = db.session.scalar(select(Subscriber))
    assert (zoe.email, zoe.name, zoe.attributes) == ("zoe@example.com", "Zoe; Jr", {"Plan": "gold"})


UNUSABLE_FILES = [
    (b"", "The file is empty."),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", "not a CSV file"),
    (b"name,city\nAnn,Paris\n", "must be a header with an &#39;email&#39; column"),
    (b"email,name\n\n\n", "has a header row but no subscribers"),
    ("email,name\nann@example.com,Ann\n".encode("utf-16"), "UTF-16"),
    (b"em\xe9il,name\nann@example.com,Ann\n", "header row is not UTF-8"),
    (b"email,Email\nann@example.com,x\n", "more than once"),
    (b"email,name\rann@example.com,Ann\r", "CR only"),
    (b"email" + b"x" * 70000 + b"\n", "not a CSV file"),
]


def test_a_file_that_is_not_a_usable_csv_gets_a_clear_error_and_writes_nothing(
        logged_in_client, weekly, app):
    for content, message in UNUSABLE_FILES:
        response = upload(logged_in_client, weekly.id, content)
        assert response.status_code == 422, message
        assert message in response.text
    assert count(Import) == count(Subscriber) == count(Subscription) == 0
    assert list((Path(app.instance_path) / "imports").glob("*")) == []


@pytest.fixture
def small_limit(app_config):
    app_config["MAX_IMPORT_BYTES"] = 1000


def test_a_file_over_the_limit_is_refused_and_writes_nothing(small_limit, logged_in_client,
                                                             weekly, app):
    body = b"email\n" + b"".join(b"p%d@example.com\n" % i for i in range(100))
    response = upload(logged_in_client, weekly.id, body)
    assert response.status_code == 422 and "larger than the import limit" in response.text
    huge = upload(logged_in_client, weekly.id, body * 100)  # past MAX_CONTENT_LENGTH as well
    assert huge.status_code == 413 and "larger than the import limit" in huge.text
    assert count(Import) == count(Subscriber) == 0
    assert list((Path(app.instance_path) / "imports").glob("*")) == []


def test_reimporting_the_same_file_changes_nothing(logged_in_client, weekly):
    content = b"email,name,plan\na@example.com,A,gold\nb@example.com,B,\n"
    upload(logged_in_client, weekly.id, content)
    first = last_import()
    assert (first.imported, first.updated) == (2, 0)
    events = count(Event)
    upload(logged_in_client, weekly.id, content)
    again = last_import()
    assert (again.imported, again.updated, again.rejected) == (0, 2, 0)
    assert count(Subscriber) == 2 and count(Subscription) == 2 and count(Event) == events


def test_existing_people_gain_the_list_but_nobody_is_reactivated(logged_in_client, weekly,
                                                                 run_worker_burst):
    other = lists.create_list(db.session, "Other")
    upload(logged_in_client, other.id, b"email,name\nknown@example.com,Known\n")
    upload(logged_in_client, weekly.id,
           b"email\nleft@example.com\nblocked@example.com\npending@example.com\n")
    subs = {s.email: s for s in db.session.scalars(select(Subscriber))}
    db.session.execute(
        Subscription.__table__.update()
        .where(Subscription.subscriber_id == subs["left@example.com"].id)
        .values(status="unsubscribed", unsubscribe_source="one-click")
    )
    db.session.execute(
        Subscription.__table__.update()
        .where(Subscription.subscriber_id == subs["pending@example.com"].id)
        .values(status="unconfirmed")
    )
    subs["blocked@example.com"].suppression = "complained"
    db.session.commit()

    content = (b"email,name,plan\nknown@example.com,Known Better,gold\nleft@example.com,,\n"
               b"blocked@example.com,,\npending@example.com,,\nnew@example.com,,\n")
    upload(logged_in_client, weekly.id, content)
    record = last_import()
    assert (record.imported, record.updated, record.skipped_unsubscribed,
            record.skipped_suppressed) == (2, 1, 1, 1)  # known and new; pending; left; blocked
    page = logged_in_client.get(f"/subscribers/imports/{record.id}").text
    assert "1 skipped because they unsubscribed from this list" in page
    assert "1 skipped because their address is suppressed" in page
    upload(logged_in_client, other.id, b"email\nblocked-too@example.com\n")
    record = last_import()
    assert (record.imported, record.updated) == (1, 0)
    db.session.execute(Subscriber.__table__.update()
                       .where(Subscriber.email == "blocked-too@example.com")
                       .values(suppression="bounced"))
    db.session.commit()
    upload(logged_in_client, weekly.id, b"email\nblocked-too@example.com\n")

    assert statuses(weekly.id) == {
        "known@example.com": "active", "left@example.com": "unsubscribed",
        "blocked@example.com": "active", "pending@example.com": "unconfirmed",
        "new@example.com": "active",
    }
    assert statuses(other.id)["known@example.com"] == "active"
    known = db.session.scalar(select(Subscriber).where(Subscriber.email == "known@example.com"))
    assert (known.name, known.attributes) == ("Known Better", {"plan": "gold"})
    blocked = db.session.scalar(select(Subscriber).where(Subscriber.email == "blocked@example.com"))
    assert blocked.suppression == "complained"
    # A suppressed person is not put on a list they were not on.
    record = last_import()
    assert (record.imported, record.updated, record.skipped_suppressed) == (0, 0, 1)


@pytest.fixture
def always_background(app_config):
    app_config["IMPORT_INLINE_MAX_BYTES"] = 0


def run_imports_queue(run_worker_burst) -> None:
    """The real worker, in this process, until its queues are empty."""
    assert run_worker_burst() == 0


def test_big_imports_run_in_the_background_job_with_a_progress_bar(
        always_background, logged_in_client, weekly, app, run_worker_burst):
    content = b"email,name\n" + b"".join(b"p%d@example.com,P %d\n" % (i, i) for i in range(2500))
    response = upload(logged_in_client, weekly.id, content)
    assert response.status_code == 303
    record = last_import()
    assert record.status == "queued"
    assert stored.has_upload(db.session, record.id)  # in the database, for any host's worker
    page = logged_in_client.get(response.headers["Location"])
    assert 'hx-trigger="every 1s"' in page.text and "<progress" in page.text
    polling = logged_in_client.get(f"/subscribers/imports/{record.id}/progress")
    assert polling.status_code == 200 and "Waiting for the worker" in polling.text
    assert "of about 2," in polling.text  # estimated from the first 64 KB

    run_imports_queue(run_worker_burst)

    record = last_import()
    assert (record.status, record.imported, record.processed_rows) == ("done", 2500, 2500)
    done = logged_in_client.get(f"/subscribers/imports/{record.id}/progress")
    assert done.status_code == 286  # htmx stops polling
    assert "The import is finished" in done.text
    assert not stored.has_upload(db.session, record.id)
    assert not (Path(app.instance_path) / "imports" / f"{record.id}.csv").exists()
    assert count(Subscription) == 2500


def test_a_duplicated_import_job_does_nothing_the_second_time( always_background,
                                                              logged_in_client, weekly, app,
                                                              run_worker_burst):
    upload(logged_in_client, weekly.id, b"email\none@example.com\ntwo@example.com\n")
    record = last_import()
    get_jobs().enqueue_import(record.id)
    run_imports_queue(run_worker_burst)
    record = last_import()
    assert (record.status, record.imported, record.updated) == ("done", 2, 0)
    assert count(Event) == 2


def test_an_import_into_a_deleted_list_fails_visibly( always_background, logged_in_client,
                                                     weekly, app, run_worker_burst):
    upload(logged_in_client, weekly.id, b"email\none@example.com\n")
    record_id = last_import().id
    lists.delete_list(db.session, weekly.id)
    run_imports_queue(run_worker_burst)
    record = db.session.get(Import, record_id)
    assert record.status == "failed" and "deleted" in record.error
    page = logged_in_client.get(f"/subscribers/imports/{record_id}")
    assert "The import failed" in page.text


def test_imports_a_dead_worker_left_behind_are_recovered_at_worker_start(
        always_background, logged_in_client, weekly, app, run_worker_burst):
    upload(logged_in_client, weekly.id, b"email\none@example.com\ntwo@example.com\n")
    upload(logged_in_client, weekly.id, b"email\nthree@example.com\n")
    interrupted, lost = (r.id for r in db.session.scalars(select(Import).order_by(Import.id)))
    # Simulate a worker killed mid-import: one row claimed, the queue emptied, one file lost.
    db.session.execute(Import.__table__.update().where(Import.id == interrupted)
                       .values(status="running"))
    db.session.commit()
    get_jobs().queue(IMPORTS).empty()
    stored.discard(db.session, lost)

    run_imports_queue(run_worker_burst)  # the worker recovers both when it starts
    db.session.expire_all()
    done, failed = db.session.get(Import, interrupted), db.session.get(Import, lost)
    assert (done.status, done.imported) == ("done", 2)
    assert failed.status == "failed" and "upload the file again" in failed.error


def test_the_real_worker_process_runs_a_background_import(always_background, logged_in_client,
                                                          weekly, app, worker_factory):
    content = b"email\n" + b"".join(b"w%d@example.com\n" % i for i in range(1500))
    upload(logged_in_client, weekly.id, content)
    record_id = last_import().id
    worker = worker_factory()

    def finished():
        db.session.expire_all()
        return db.session.get(Import, record_id).status in ("done", "failed")

    try:
        wait_until(finished, timeout=30, message="the worker did not finish the import")
    except AssertionError:
        print(worker.output)
        raise
    record = db.session.get(Import, record_id)
    assert (record.status, record.imported) == ("done", 1500), record.error
