"""Attachments as stored: the type decided from the file's own bytes against the allowed list
(a `.pdf` that is not a PDF refused), the name cleaned or refused, the 10 MB a message may
carry said with the numbers, and a file still named by a draft or a frozen revision kept."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.errors import Conflict, ValidationError
from broadside.core.models import Attachment, Broadcast, Revision
from broadside.mail import attachment_use
from broadside.mail.attachments import MAX_TOTAL, clean_name, kind_of, store
from tests import attachment_files as files
from tests.helpers import make_list

KINDS = [
    ("programme.pdf", files.PDF, "application/pdf"),
    ("photo.PNG", files.PNG, "image/png"),
    ("photo.jpg", files.JPEG, "image/jpeg"),
    ("photo.jpeg", files.JPEG, "image/jpeg"),
    ("anim.gif", files.GIF, "image/gif"),
    ("pic.webp", files.WEBP, "image/webp"),
    ("party.ics", files.ICS, "text/calendar"),
    ("notes.txt", files.TXT, "text/plain"),
    ("table.csv", files.CSV, "text/csv"),
    ("letter.docx", files.office_open("docx"),
     "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ("sums.xlsx", files.office_open("xlsx"),
     "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ("deck.pptx", files.office_open("pptx"),
     "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    ("letter.odt", files.open_document("odt"), "application/vnd.oasis.opendocument.text"),
    ("sums.ods", files.open_document("ods"), "application/vnd.oasis.opendocument.spreadsheet"),
    ("deck.odp", files.open_document("odp"), "application/vnd.oasis.opendocument.presentation"),
    ("old.doc", files.compound("WordDocument"), "application/msword"),
    ("old.xls", files.compound("Workbook"), "application/vnd.ms-excel"),
]


@pytest.mark.parametrize(("name", "data", "content_type"), KINDS)
def test_each_allowed_kind_is_known_by_its_bytes(db_session, name, data, content_type):
    stored = store(db_session, name=name, data=data, uploaded_by=None)
    assert (stored.content_type, stored.size) == (content_type, len(data))
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    db_session.expire_all()
    assert db_session.get(Attachment, stored.id).data == data  # the bytes, in the database


@pytest.mark.parametrize(("name", "data", "said"), [
    ("report.pdf", b"<html>not a pdf</html>", "is named .pdf but its content is not a PDF"),
    ("report.pdf", files.PNG, "it looks like PNG image"),
    ("photo.png", files.JPEG, "not a PNG image"),
    ("letter.docx", files.open_document("odt"), "not a Word document"),
    ("letter.docx", b"PK\x03\x04broken zip", "not a Word document"),
    ("old.doc", files.compound("Workbook"), "not a Word 97-2003 document"),
    ("party.ics", files.TXT, "not a calendar event"),
    ("notes.txt", b"text\x00with NUL", "not a text"),
    ("notes.txt", b"\xff\xfe not utf-8 \xff", "not a text"),
    ("run.exe", b"MZ\x90\x00", "does not send .exe files"),
    ("page.html", b"<p>hi</p>", "does not send .html files"),
    ("noextension", files.PDF, "does not send a file whose name has no extension"),
])
def test_a_file_that_is_not_what_its_name_says_is_refused(name, data, said):
    with pytest.raises(ValidationError) as refused:
        kind_of(name, data)
    assert said in refused.value.message
    assert refused.value.field == "file"


@pytest.mark.parametrize(("raw", "clean"), [
    ("  Programme   2027.pdf ", "Programme 2027.pdf"),
    ("Cafe\u0301.pdf", "Café.pdf"),  # NFC
    ("日本語のファイル.pdf", "日本語のファイル.pdf"),
])
def test_names_are_kept_clean(raw, clean):
    assert clean_name(raw) == clean


@pytest.mark.parametrize(("raw", "said"), [
    ("../../etc/passwd.txt", "without folders"),
    ("C:\\Users\\ann\\cv.pdf", "without folders"),
    ("cv\x00.pdf", "control or invisible"),
    ("invoice\u202efdp.exe", "control or invisible"),  # right-to-left override
    ("line\nbreak.pdf", "control or invisible"),
    ("   ", "needs a name"),
    ("..", "needs a name"),
    ("a" * 201 + ".pdf", "at most 200 characters"),
])
def test_names_with_paths_or_control_characters_are_refused(raw, said):
    with pytest.raises(ValidationError) as refused:
        clean_name(raw)
    assert said in refused.value.message


def test_a_file_over_the_limit_is_refused_with_the_numbers(db_session):
    with pytest.raises(ValidationError) as refused:
        store(db_session, name="big.txt", data=b"a" * (MAX_TOTAL + 1), uploaded_by=None)
    assert "10.0 MB" in refused.value.message
    assert db_session.scalar(select(Attachment.id)) is None


def test_the_total_per_message_is_10_mb_with_the_numbers(db_session):
    six = store(db_session, name="six.txt", data=b"a" * (6 * 1024 * 1024), uploaded_by=None)
    five = store(db_session, name="five.txt", data=b"b" * (5 * 1024 * 1024), uploaded_by=None)
    assert attachment_use.checked_ids(db_session, [six.id]) == [six.id]
    with pytest.raises(ValidationError) as refused:
        attachment_use.checked_ids(db_session, [six.id, five.id])
    assert refused.value.message == ("The attachments come to 11.0 MB; a message carries at "
                                     "most 10.0 MB in all.")
    with pytest.raises(ValidationError) as refused:
        attachment_use.room_for(db_session, [six.id], 5 * 1024 * 1024)
    assert "This file is 5.0 MB and the message already carries 6.0 MB: together 11.0 MB" \
        in refused.value.message


def test_unknown_or_malformed_ids_are_named(db_session):
    pdf = store(db_session, name="a.pdf", data=files.PDF, uploaded_by=None)
    with pytest.raises(ValidationError, match="There is no attachment 424242"):
        attachment_use.checked_ids(db_session, [pdf.id, 424242])
    with pytest.raises(ValidationError, match='holds "7", which is not an attachment id'):
        attachment_use.checked_ids(db_session, ["7"])
    with pytest.raises(ValidationError, match="Step 2: there is no attachment 9"):
        attachment_use.checked_ids(db_session, [9], where="Step 2: ")
    assert attachment_use.checked_ids(db_session, [pdf.id, pdf.id]) == [pdf.id]


def test_a_file_named_by_a_draft_or_a_sent_revision_cannot_be_deleted(app, db_session):
    pdf = store(db_session, name="a.pdf", data=files.PDF, uploaded_by=None)
    spare = store(db_session, name="b.pdf", data=files.PDF, uploaded_by=None)
    weekly = make_list(db_session, 2)
    draft = create_draft(db_session, list_id=weekly.id, subject="Hi", body="x")
    attachment_use.attach_to_draft(db_session, draft.id, [pdf.id])
    with pytest.raises(Conflict, match="used by a broadcast"):
        attachment_use.delete_attachment(db_session, pdf.id)

    # Sent: freezing copies the list into the revision, which keeps the file in use even
    # when nothing else names it any more.
    attachment_use.attach_to_draft(db_session, draft.id, [])
    other = create_draft(db_session, list_id=weekly.id, subject="Sent", body="y")
    attachment_use.attach_to_draft(db_session, other.id, [pdf.id])
    sent = send_broadcast(db_session, other.id, default_from=app.config["MAIL_FROM"], jobs=None)
    revision = db_session.scalar(select(Revision).where(Revision.broadcast_id == sent.id))
    assert revision.attachment_ids == [pdf.id]
    db_session.execute(Broadcast.__table__.update().values(attachment_ids=None))
    db_session.commit()
    with pytest.raises(Conflict):
        attachment_use.delete_attachment(db_session, pdf.id)
    with pytest.raises(Conflict, match="Only a draft's attachments"):
        attachment_use.attach_to_draft(db_session, sent.id, [spare.id])

    attachment_use.delete_attachment(db_session, spare.id)
    assert db_session.get(Attachment, spare.id) is None
