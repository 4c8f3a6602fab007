"""What an import says it did: the blank rows it skipped, counted with their lines, and the
welcome series it was asked for, on the form before the upload, on the result page and over
the API, including when the list has no enabled welcome automation to give."""

import io

import pytest
from sqlalchemy import func, select

from broadside.audience import lists as lists
from broadside.campaigns.automations import service as automations
from broadside.core.models import AutomationEntry
from tests.helpers import csrf_token_from
from tests.webapp.import_steps import last_import, upload
from webapp.extensions import db

NO_SERIES = "No enabled welcome automation on this list: nobody would get one."


def welcome_series(app, list_id: int, name: str) -> None:
    data = automations.parse_input({
        "name": name, "trigger": {"type": "joined_list", "list_id": list_id},
        "steps": [{"delay": "PT0S", "subject": "Hi", "body": "Welcome."}]})
    automations.enable(db.session, automations.create_automation(
        db.session, data, default_from=app.config["MAIL_FROM"]).id)


@pytest.fixture
def two_lists(app, postal_address):
    bare = lists.create_list(db.session, "Bare").id
    greeted = lists.create_list(db.session, "Greeted").id
    welcome_series(app, greeted, "Say hello")
    return bare, greeted


def entries() -> int:
    return db.session.scalar(select(func.count()).select_from(AutomationEntry))


def upload_welcoming(client, list_id: int, content: bytes):
    page = client.get(f"/subscribers/import?list={list_id}")
    return client.post("/subscribers/import", data={
        "list_id": str(list_id), "consent": "opted_in", "welcome": "y",
        "csrf_token": csrf_token_from(page.text),
        "file": (io.BytesIO(content), "people.csv")}, content_type="multipart/form-data")


def test_empty_rows_are_counted_and_their_lines_reported(logged_in_client, two_lists):
    bare, _ = two_lists
    upload(logged_in_client, bare,
           b"email,name,city\nann@example.com,Ann,Paris\n\n,,\nbob@example.com,Bob,\n  , ,\n")
    record = last_import()
    assert (record.imported, record.rejected, record.empty_rows) == (2, 0, 3)
    page = logged_in_client.get(f"/subscribers/imports/{record.id}").text
    assert "3 empty rows were skipped (lines 3, 4, 6)." in page


def test_the_import_form_says_before_the_upload_when_nobody_would_be_welcomed(
        logged_in_client, two_lists):
    bare, greeted = two_lists
    assert NO_SERIES in logged_in_client.get(f"/subscribers/import?list={bare}").text
    page = logged_in_client.get(f"/subscribers/import?list={greeted}").text
    assert NO_SERIES not in page and "Welcome series on this list: <strong>Say hello</strong>" in page
    # Choosing another list asks again (htmx swaps the line).
    assert 'hx-get="/subscribers/import/welcome-hint"' in page
    hint = logged_in_client.get(f"/subscribers/import/welcome-hint?list_id={bare}").text
    assert NO_SERIES in hint and 'id="welcome-hint"' in hint


def test_the_result_page_says_who_was_welcomed_or_that_nobody_could_be(logged_in_client,
                                                                      two_lists):
    bare, greeted = two_lists
    upload_welcoming(logged_in_client, bare, b"email\nann@example.com\nbob@example.com\n")
    record = last_import()
    page = logged_in_client.get(f"/subscribers/imports/{record.id}").text
    assert record.welcome and record.imported == 2 and record.welcomed == 0
    assert "except the welcome series" not in page
    assert ("Nobody got the welcome series you asked for: this list had no enabled welcome "
            "automation when the import ran.") in page
    assert entries() == 0

    upload_welcoming(logged_in_client, greeted, b"email\nann@example.com\nbob@example.com\n")
    record = last_import()
    page = logged_in_client.get(f"/subscribers/imports/{record.id}").text
    assert record.welcomed == 2 and entries() == 2
    assert "2 people entered the welcome series (Say hello)." in page


def test_the_api_says_who_was_welcomed_and_counts_empty_rows(client, api_headers, two_lists):
    bare, greeted = two_lists

    def post(list_id: int, content: bytes) -> dict:
        response = client.post(f"/api/lists/{list_id}/import", headers=api_headers, data={
            "file": (io.BytesIO(content), "people.csv"), "consent": "opted_in",
            "welcome": "1"}, content_type="multipart/form-data")
        assert response.status_code == 200
        return response.get_json()

    answer = post(bare, b"email\nann@example.com\n\n")
    assert (answer["imported"], answer["welcomed"], answer["empty_rows"]) == (1, 0, 1)
    assert answer["welcome_note"] == ("No enabled welcome automation on this list: nobody got "
                                      "the welcome series.")
    answer = post(greeted, b"email\nann@example.com\n")
    assert (answer["imported"], answer["welcomed"], answer["welcome_note"]) == (1, 1, None)
