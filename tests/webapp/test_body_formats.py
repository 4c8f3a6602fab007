"""The body's format over the API (broadcasts, automation steps, transactional templates) on
SQLite and PostgreSQL, the editor's conversion endpoint, and the merge report over HTML."""

from __future__ import annotations

from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.merge_report import merge_report
from broadside.core.models import Broadcast
from tests.helpers import csrf_token_from, make_list
from webapp.extensions import db

HTML = '<p>Hello {{ name or &quot;friend&quot; }}</p><table><tr><td align="right">x</td></tr></table>'


def stored(broadcast_id: int) -> Broadcast:
    db.session.expire_all()
    return db.session.get(Broadcast, broadcast_id)


def test_a_broadcasts_format_is_created_patched_read_and_refused_by_name(client, api_headers):
    readers = make_list(db.session, 1)
    made = client.post("/api/broadcasts", headers=api_headers,
                       json={"list_id": readers.id, "subject": "Hi", "body": HTML,
                             "format": "html"})
    assert made.status_code == 201 and made.json["format"] == "html"
    broadcast = stored(made.json["id"])
    # Stored with its merge field as typed; opened in the HTML mode (not the rich editor).
    assert broadcast.body.startswith('<p>Hello {{ name or "friend" }}</p>')
    assert (broadcast.body_format, broadcast.editor) == ("html", "html")
    assert client.get(f"/api/broadcasts/{broadcast.id}", headers=api_headers).json["format"] == "html"
    listed = client.get("/api/broadcasts", headers=api_headers).json["items"]
    assert listed[0]["format"] == "html"

    plain = client.post("/api/broadcasts", headers=api_headers,
                        json={"list_id": readers.id, "subject": "Hi", "body": "**x**"})
    assert plain.json["format"] == "markdown"  # the default

    patched = client.patch(f"/api/broadcasts/{broadcast.id}", headers=api_headers,
                           json={"format": "markdown"})
    assert patched.status_code == 200 and patched.json["format"] == "markdown"
    assert stored(broadcast.id).editor == "markdown"
    # A PATCH without format leaves it as it is.
    client.patch(f"/api/broadcasts/{broadcast.id}", headers=api_headers, json={"subject": "Yo"})
    assert stored(broadcast.id).body_format == "markdown"

    for bad in ("docx", "HTML", None, 3):
        refused = client.patch(f"/api/broadcasts/{broadcast.id}", headers=api_headers,
                               json={"format": bad})
        assert refused.status_code == 422 and refused.json["field"] == "format", bad
        refused = client.post("/api/broadcasts", headers=api_headers,
                              json={"list_id": readers.id, "subject": "Hi", "body": "x",
                                    "format": bad})
        assert refused.status_code == 422 and refused.json["field"] == "format", bad
    assert stored(broadcast.id).body_format == "markdown"


def test_a_steps_format_over_the_api(client, api_headers):
    readers = make_list(db.session, 1)
    body = {"name": "Welcome", "trigger": {"type": "joined_list", "list_id": readers.id},
            "steps": [{"subject": "Hi", "body": HTML, "format": "html"},
                      {"subject": "Later", "body": "**x**"}]}
    made = client.post("/api/automations", headers=api_headers, json=body)
    assert made.status_code == 201, made.json
    steps = made.json["steps"]
    assert [s["format"] for s in steps] == ["html", "markdown"]
    assert steps[0]["body"].startswith('<p>Hello {{ name or "friend" }}</p>')
    body["steps"][1]["format"] = "rtf"
    refused = client.put(f"/api/automations/{made.json['id']}", headers=api_headers, json=body)
    assert refused.status_code == 422 and refused.json["field"] == "steps[1].format"


def test_a_templates_format_over_the_api(client, api_headers):
    made = client.post("/api/transactional/templates", headers=api_headers,
                       json={"name": "Receipt", "subject": "Paid", "body": HTML, "format": "html"})
    assert made.status_code == 201 and made.json["format"] == "html"
    replaced = client.put(f"/api/transactional/templates/{made.json['id']}", headers=api_headers,
                          json={"name": "Receipt", "subject": "Paid", "body": "**x**"})
    assert replaced.status_code == 200 and replaced.json["format"] == "markdown"
    refused = client.put(f"/api/transactional/templates/{made.json['id']}", headers=api_headers,
                         json={"name": "Receipt", "subject": "Paid", "body": "x",
                               "format": "wiki"})
    assert refused.status_code == 422 and refused.json["field"] == "format"


def test_the_merge_report_reads_an_html_body_as_typed(app):
    readers = make_list(db.session, 2)
    broadcast = drafts.create_draft(db.session, list_id=readers.id, subject="Hi",
                                    editor="rich", body=(
                                        "<div>Hello {{ nmae }}<br>\n"
                                        "{% if attributes.age &gt; 3 %}<br>\nold<br>\n"
                                        "{% endif %}</div>"))
    report = merge_report(db.session, broadcast)
    assert report.problems == []  # &gt; read back to > in the stored body
    [unknown] = [u for u in report.unknown if u.written == "nmae"]
    assert unknown.written == "nmae" and unknown.line == 1 and "Did you mean {{ name }}" in unknown.message
    broken = drafts.update_draft(db.session, broadcast.id, list_id=readers.id, subject="Hi",
                                 preheader="", editor="html",
                                 body="<p>Fine</p>\n<p>Hello {{ name </p>")
    [problem] = merge_report(db.session, broken).problems
    assert "line 2" in problem.message


def test_the_editor_converts_and_says_what_would_be_lost(logged_in_client):
    page = logged_in_client.get("/broadcasts/")
    token = csrf_token_from(page.text)

    def convert(body, source, target):
        return logged_in_client.post("/compose/convert", headers={"X-CSRFToken": token},
                                     data={"body": body, "from": source, "to": target})

    to_rich = convert('# Hi {{ attributes.first_name }}\n\n**bold**', "markdown", "rich")
    assert to_rich.status_code == 200 and to_rich.json["warning"] is None
    assert to_rich.json["body"] == "<h1>Hi {{ attributes.first_name }}</h1>\n<p><strong>bold</strong></p>"
    back = convert(to_rich.json["body"], "rich", "markdown")
    assert back.json == {"body": "# Hi {{ attributes.first_name }}\n\n**bold**\n", "lost": [],
                         "warning": None}
    lossy = convert(HTML, "html", "markdown")
    assert lossy.json["lost"] == ["alignment", "tables"]
    assert lossy.json["warning"] == ("Markdown cannot hold alignment and tables: switching "
                                     "removes them from this body. Keep the current mode to "
                                     "keep them.")
    assert convert(HTML, "html", "rich").json["lost"] == ["alignment", "tables"]
    assert convert(HTML, "rich", "html").json == {"body": HTML, "lost": [], "warning": None}
    refused = convert("x", "markdown", "word")
    assert refused.status_code == 422 and refused.json["field"] == "to"
    # Without the page's token, nothing is converted (a cross-site form cannot use it).
    assert logged_in_client.post("/compose/convert", data={"body": "x", "from": "markdown",
                                                           "to": "html"}).status_code == 400
