"""The media library over the API (webapp/api/media.py): upload as multipart with or without
a filename, list a page at a time, delete, 409 naming what uses it, 422 naming the field,
and the roles a token carries."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.models import AuditEntry, Media
from tests.helpers import make_list
from tests.media_images import animated_gif, open_image, still
from webapp.extensions import db


def form(data: bytes, *, alt: str | None = None, filename: str | None = "photo.png",
         name: str = "file") -> tuple[bytes, str]:
    boundary = "api-media-boundary"
    body = b""
    if alt is not None:
        body += (f'--{boundary}\r\nContent-Disposition: form-data; name="alt"\r\n\r\n'
                 f"{alt}\r\n").encode()
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    body += (f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
             "Content-Type: application/octet-stream\r\n\r\n").encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def post(client, headers, data: bytes, **kwargs):
    body, content_type = form(data, **kwargs)
    return client.post("/api/media", data=body, content_type=content_type, headers=headers)


def test_upload_answers_201_with_the_image_and_the_same_file_200(client, api_headers, app):
    created = post(client, api_headers, still("JPEG", 1400, 700), alt="Stripes",
                   filename="stripes.jpg")
    assert created.status_code == 201, created.json
    body = created.json
    media = db.session.get(Media, body["id"])
    assert {k: body[k] for k in ("width", "height", "alt")} == {
        "width": 600, "height": 300, "alt": "Stripes"}
    assert body["url"] == f"{app.config['BASE_URL']}/media/{media.sha256}.jpg"
    assert body["name"] == "stripes.jpg" and body["content_type"] == "image/jpeg"
    assert client.get(body["url"].removeprefix(app.config["BASE_URL"])).status_code == 200
    again = post(client, api_headers, still("JPEG", 1400, 700), filename=None)  # no filename
    assert again.status_code == 200 and again.json["id"] == body["id"]
    db.session.expire_all()
    actions = db.session.scalars(select(AuditEntry.action)).all()
    assert "media.upload" in actions


def test_an_animated_gif_without_a_filename_is_an_image_too(client, api_headers):
    answer = post(client, api_headers, animated_gif(300, 200, 4), filename=None)
    assert answer.status_code == 201 and answer.json["animated"] is True
    media = db.session.get(Media, answer.json["id"])
    assert (media.width, media.has_2x) == (300, False)
    assert open_image(client.get(f"/media/{media.sha256}.gif").data).n_frames == 4


@pytest.mark.parametrize(("kwargs", "field", "said"), [
    pytest.param({"data": b"GIF89a but not really an image at all"}, "file",
                 "not a PNG, JPEG, GIF or WebP", id="not-an-image"),
    pytest.param({"data": still("PNG", 800, 600)[:1500]}, "file", "truncated or damaged",
                 id="truncated"),
    pytest.param({"data": still("PNG", 80, 60), "alt": "x" * 1001}, "alt", "too long",
                 id="alt-too-long"),
    pytest.param({"data": b"not here", "name": "image"}, "file", 'named "file"',
                 id="no-file-part"),
])
def test_refusals_are_422_naming_the_field(client, api_headers, kwargs, field, said):
    answer = post(client, api_headers, **kwargs)
    assert answer.status_code == 422
    assert answer.json["field"] == field and said in answer.json["error"]
    assert db.session.scalar(select(func.count()).select_from(Media)) == 0


def test_over_10_mb_is_refused_before_the_body_is_read(client, api_headers):
    answer = post(client, api_headers, b"\x89PNG\r\n\x1a\n" + b"\0" * (10 * 1024 * 1024 + 70_000))
    assert answer.status_code == 422 and "at most 10 MB" in answer.json["error"]


def test_list_pages_by_ascending_id(client, api_headers):
    ids = [post(client, api_headers, still("PNG", 100 + n, 50)).json["id"] for n in range(3)]
    first = client.get("/api/media?limit=2", headers=api_headers).json
    assert [i["id"] for i in first["items"]] == ids[:2] and first["next"] == ids[1]
    second = client.get(f"/api/media?limit=2&after={first['next']}", headers=api_headers).json
    assert [i["id"] for i in second["items"]] == ids[2:] and second["next"] is None
    assert client.get("/api/media?limit=0", headers=api_headers).status_code == 422
    assert client.get("/api/media?page=2", headers=api_headers).status_code == 422


def test_delete_is_204_and_409_naming_the_draft_that_uses_it(client, api_headers, app):
    body = post(client, api_headers, still("PNG", 700, 300)).json
    weekly = make_list(db.session, 1)
    draft = create_draft(db.session, list_id=weekly.id, subject="November news",
                         body=f"![]({body['url']})")
    held = client.delete(f"/api/media/{body['id']}", headers=api_headers)
    assert held.status_code == 409
    assert "November news" in held.json["error"]
    assert held.json["used_by"] == [{"kind": "broadcast", "id": draft.id,
                                     "title": "November news", "state": "draft"}]
    draft.body = "Nothing here."
    db.session.commit()
    assert client.delete(f"/api/media/{body['id']}", headers=api_headers).status_code == 204
    assert client.delete(f"/api/media/{body['id']}", headers=api_headers).status_code == 404


def test_tokens_by_role(client, token_headers_as):
    viewer, writer = token_headers_as("viewer"), token_headers_as("writer")
    read_only = token_headers_as("admin", read_only=True, email="reader@example.com")
    assert client.get("/api/media", headers=viewer).status_code == 200
    assert post(client, viewer, still("PNG", 60, 40)).status_code == 403
    assert post(client, read_only, still("PNG", 60, 40)).status_code == 403
    made = post(client, writer, still("PNG", 60, 40))
    assert made.status_code == 201
    assert client.delete(f"/api/media/{made.json['id']}", headers=writer).status_code == 403
    admin = token_headers_as("admin")
    assert client.delete(f"/api/media/{made.json['id']}", headers=admin).status_code == 204
