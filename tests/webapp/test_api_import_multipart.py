"""The import's multipart `file` is the CSV whether or not its part carries a filename (curl's
`-F 'file=<people.csv'` sends none; Werkzeug made it a text field and the import answered
"Send the CSV as a multipart form field named "file"" though it had been sent). Its bytes are
read as sent: a line that is not UTF-8 is rejected by the importer, not imported with its
letters replaced."""

from __future__ import annotations

from tests.helpers import make_list
from webapp.extensions import db

BOUNDARY = "----broadside-test"


def multipart(parts: list[tuple[str, bytes, str | None]]) -> bytes:
    """A multipart/form-data body of (name, content, filename or None) parts."""
    body = b""
    for name, content, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += (f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n").encode() + content
        body += b"\r\n"
    return body + f"--{BOUNDARY}--\r\n".encode()


def send(client, headers, list_id: int, body: bytes):
    return client.post(f"/api/lists/{list_id}/import", headers=headers, data=body,
                       content_type=f"multipart/form-data; boundary={BOUNDARY}")


def test_a_file_part_without_a_filename_is_imported(client, api_headers):
    weekly = make_list(db.session, 0, name="Weekly").id
    csv = b"email,name\nann@example.com,Ann\nbob@example.com,Bob\n"
    response = send(client, api_headers, weekly,
                    multipart([("file", csv, None), ("consent", b"opted_in", None)]))
    assert response.status_code == 200, response.json
    assert response.json["imported"] == 2 and response.json["rejected"] == []

    named = send(client, api_headers, weekly, multipart([("file", csv, "people.csv")]))
    assert named.status_code == 200 and named.json["updated"] == 2  # with one, as before


def test_a_nameless_file_keeps_its_bytes(client, api_headers):
    weekly = make_list(db.session, 0, name="Weekly").id
    csv = b"email,name\nann@example.com,Ann\njose@example.com,Jos\xe9\n"  # Latin-1, not UTF-8
    response = send(client, api_headers, weekly, multipart([("file", csv, None)]))
    assert response.status_code == 200, response.json
    assert response.json["imported"] == 1
    assert [r["line"] for r in response.json["rejected"]] == [3]
    assert "not valid UTF-8" in response.json["rejected"][0]["reason"]


def test_the_form_fields_next_to_a_nameless_file_are_read(client, api_headers):
    weekly = make_list(db.session, 0, name="Weekly").id
    csv = b"email\nann@example.com\n"
    response = send(client, api_headers, weekly,
                    multipart([("file", csv, None), ("consent", b"maybe", None)]))
    assert response.status_code == 422 and '"consent"' in response.json["error"]
    nothing = send(client, api_headers, weekly, multipart([("consent", b"opted_in", None)]))
    assert nothing.status_code == 422
    assert nothing.json["error"] == 'Send the CSV as a multipart form field named "file".'
