"""The media library's pages and files (webapp/media): upload through the page, the stored
bytes cleaned, the same file once, the public file's headers, MEDIA_URL, where an image is
used and no deleting one that may still be sent (on SQLite and PostgreSQL), who may do what,
and the send confirmation's card of images without alt text."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import service as broadcasts
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.config import ConfigError
from broadside.core.models import AuditEntry, Media, MediaFile
from broadside.core.timeutil import utcnow
from broadside.mail import media as library
from tests.helpers import csrf_token_from, make_list
from tests.media_images import SECRET_CAMERA, animated_gif, open_image, photo_with_exif, still
from tests.own_apps import own_app
from tests.webapp.role_clients import signed_in
from webapp import create_app
from webapp.extensions import db


def page_token(client) -> str:
    return csrf_token_from(client.get("/media/").text)


def multipart(fields: dict[str, str], data: bytes, filename: str,
              content_type: str = "application/octet-stream") -> tuple[bytes, str]:
    """A multipart body built here: werkzeug's test client spools a body over 500 KB to a
    temporary file it never closes (an unraisable ResourceWarning)."""
    boundary = "media-test-boundary"
    body = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                    f"{value}\r\n".encode() for name, value in fields.items())
    body += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
             f'filename="{filename}"\r\nContent-Type: {content_type}\r\n\r\n').encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def upload(client, data: bytes, filename: str = "photo.jpg", alt: str = "", *,
           json: bool = False):
    body, content_type = multipart({"csrf_token": page_token(client), "alt": alt}, data,
                                   filename)
    headers = {"Accept": "application/json"} if json else {}
    return client.post("/media/", data=body, content_type=content_type, headers=headers)


def only_media() -> Media:
    rows = db.session.scalars(select(Media)).all()
    assert len(rows) == 1
    return rows[0]


def stored(media: Media, variant: str) -> bytes:
    return db.session.get(MediaFile, (media.id, variant)).data


# ---------------------------------------------------------------- upload and the stored bytes

def test_upload_through_the_page_keeps_clean_resized_bytes_in_the_database(logged_in_client):
    answer = upload(logged_in_client, photo_with_exif(1600, 1200), "IMG_0042.jpg",
                    alt="The harbour at dawn")
    assert answer.status_code == 303
    media = only_media()
    assert (media.ext, media.content_type, media.alt) == ("jpg", "image/jpeg",
                                                          "The harbour at dawn")
    assert media.original_name == "IMG_0042.jpg" and media.has_2x
    assert (media.width, media.height) == (600, 800)  # stood up by its orientation, 600 wide
    for variant, size in (("1x", (600, 800)), ("2x", (1200, 1600))):
        data = stored(media, variant)
        assert SECRET_CAMERA.encode() not in data and b"Exif" not in data
        assert open_image(data).size == size
    assert media.bytes_1x == len(stored(media, "1x"))
    page = logged_in_client.get("/media/").text
    assert "IMG_0042.jpg" in page and "600 × 800 px (and 2x)" in page
    assert "Not used by any draft" in page


def test_the_same_file_uploaded_twice_is_one_image(logged_in_client):
    data = still("PNG", 700, 400)
    first = upload(logged_in_client, data, "a.png", json=True)
    again = upload(logged_in_client, data, "b.png", alt="Stripes", json=True)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json["id"] == again.json["id"] and not again.json["created"]
    assert only_media().alt == "Stripes"  # given now, when it had none
    assert db.session.scalar(select(func.count()).select_from(MediaFile)) == 2


def test_an_animated_gif_is_stored_animated(logged_in_client):
    assert upload(logged_in_client, animated_gif(640, 320, 5), "spin.gif",
                  json=True).status_code == 201
    media = only_media()
    assert media.animated and media.width == 600
    assert open_image(stored(media, "1x")).n_frames == 5
    assert "GIF, animated" in logged_in_client.get("/media/").text


@pytest.mark.parametrize(("data", "said"), [
    (b"this is a text file renamed photo.png" * 10, "not a PNG, JPEG, GIF or WebP"),
    (still("PNG", 900, 600)[:2000], "truncated or damaged"),
])
def test_a_bad_file_is_refused_with_its_reason_and_nothing_stored(logged_in_client, data, said):
    refused = upload(logged_in_client, data, "photo.png", json=True)
    assert refused.status_code == 422 and said in refused.json["error"]
    assert refused.json["field"] == "file"
    page = upload(logged_in_client, data, "photo.png")
    assert page.status_code == 303
    assert said in logged_in_client.get("/media/").text  # flashed on the library
    assert db.session.scalar(select(func.count()).select_from(Media)) == 0


def test_a_file_over_10_mb_is_refused(logged_in_client):
    refused = upload(logged_in_client, b"\xff\xd8\xff" + b"\0" * (10 * 1024 * 1024 + 100),
                     "huge.jpg", json=True)
    assert refused.status_code == 422 and "at most 10 MB" in refused.json["error"]
    assert db.session.scalar(select(func.count()).select_from(Media)) == 0


def test_alt_text_is_edited_and_the_library_searched_by_name_or_alt(logged_in_client):
    upload(logged_in_client, still("PNG", 300, 200), "stripes.png", json=True)
    upload(logged_in_client, still("JPEG", 300, 200, (0, 200, 0)), "field.jpg", json=True)
    field = db.session.scalars(select(Media).where(Media.original_name == "field.jpg")).one()
    answer = logged_in_client.post(f"/media/{field.id}/alt", data={
        "alt": "  A green   meadow ", "csrf_token": page_token(logged_in_client)})
    assert answer.status_code == 303
    db.session.refresh(field)
    assert field.alt == "A green meadow"
    found = logged_in_client.get("/media/?q=meadow").text
    assert "field.jpg" in found and "stripes.png" not in found
    assert "stripes.png" in logged_in_client.get("/media/?q=STRIPES").text
    assert "No image’s name or alt text has “nothing%”" in \
        logged_in_client.get("/media/?q=nothing%25").text
    picker = logged_in_client.get("/media/library.json?q=meadow").json
    assert [item["name"] for item in picker["items"]] == ["field.jpg"]
    assert picker["items"][0]["src"].startswith("/media/")


# ---------------------------------------------------------------- the public files

def test_files_are_public_immutable_with_their_type_and_etag(logged_in_client, app):
    upload(logged_in_client, still("WEBP", 1300, 650), "wide.webp", json=True)
    media = only_media()
    anonymous = app.test_client()
    for name, variant, width in ((f"{media.sha256}.webp", "1x", 600),
                                 (f"{media.sha256}@2x.webp", "2x", 1200)):
        answer = anonymous.get(f"/media/{name}")
        assert answer.status_code == 200
        assert answer.headers["Content-Type"] == "image/webp"
        assert answer.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert answer.data == stored(media, variant) and open_image(answer.data).width == width
        assert "Set-Cookie" not in answer.headers
        etag = answer.headers["ETag"]
        again = anonymous.get(f"/media/{name}", headers={"If-None-Match": etag})
        assert again.status_code == 304
    for unknown in (f"{media.sha256}.png", "0" * 64 + ".webp", f"{media.sha256[:-1]}.webp",
                    "../../etc/passwd", f"{media.sha256}@3x.webp"):
        assert anonymous.get(f"/media/{unknown}").status_code == 404


def test_a_small_image_has_no_2x_file(logged_in_client, app):
    upload(logged_in_client, still("PNG", 320, 200), "small.png", json=True)
    media = only_media()
    assert not media.has_2x and media.bytes_2x is None
    assert app.test_client().get(f"/media/{media.sha256}@2x.png").status_code == 404


def test_urls_use_base_url_or_media_url(app_config, logged_in_client, app):
    answer = upload(logged_in_client, still("JPEG", 1300, 650), "a.jpg", json=True).json
    sha = only_media().sha256
    assert answer["url"] == f"{app.config['BASE_URL']}/media/{sha}.jpg"
    assert answer["url_2x"] == f"{app.config['BASE_URL']}/media/{sha}@2x.jpg"
    with own_app({**app_config, "MEDIA_URL": "https://cdn.example.com/news"}) as with_cdn:
        assert with_cdn.config["MEDIA_URL"] == "https://cdn.example.com/news/"
        from webapp.media.files import media_json
        shown = media_json(db.session.get(Media, answer["id"]))
        assert shown["url"] == f"https://cdn.example.com/news/{sha}.jpg"
        assert shown["url_2x"] == f"https://cdn.example.com/news/{sha}@2x.jpg"
    with pytest.raises(ConfigError, match="MEDIA_URL"):
        create_app({**app_config, "MEDIA_URL": "ftp://files.example.com/"}, environ={})


# ---------------------------------------------------------------- where it is used

def _image(client) -> Media:
    upload(client, still("PNG", 1200, 600), "chart.png", alt="", json=True)
    return only_media()


def _url(app, media: Media) -> str:
    return library.url_of(media, base_url=app.config["BASE_URL"])


def test_an_image_in_a_draft_cannot_be_deleted_until_taken_out(logged_in_client, app):
    media = _image(logged_in_client)
    weekly = make_list(db.session, 1)
    draft = create_draft(db.session, list_id=weekly.id, subject="November news",
                         body=f"Hello\n\n![Chart]({_url(app, media)})")
    page = logged_in_client.get("/media/").text
    assert "broadcast “November news” (draft)" in page
    confirm = logged_in_client.get(f"/media/{media.id}/delete")
    assert "It cannot be deleted while this uses it" in confirm.text
    refused = logged_in_client.post(f"/media/{media.id}/delete",
                                    data={"csrf_token": page_token(logged_in_client)})
    assert refused.status_code == 303
    assert "November news" in logged_in_client.get(refused.location).text
    assert db.session.get(Media, media.id) is not None

    draft.body = "Hello, no picture."
    db.session.commit()
    deleted = logged_in_client.post(f"/media/{media.id}/delete",
                                    data={"csrf_token": page_token(logged_in_client)})
    assert deleted.status_code == 303
    db.session.expire_all()
    assert db.session.scalar(select(func.count()).select_from(Media)) == 0
    assert db.session.scalar(select(func.count()).select_from(MediaFile)) == 0
    assert app.test_client().get(f"/media/{media.sha256}.png").status_code == 404


def test_scheduled_broadcasts_live_automations_and_templates_hold_an_image(logged_in_client, app,
                                                                         postal_address):
    media = _image(logged_in_client)
    url = _url(app, media)
    weekly = make_list(db.session, 1)
    draft = create_draft(db.session, list_id=weekly.id, subject="Later", body="Soon")
    draft.text_body = f"The chart: {url}"  # the plain-text part counts too
    db.session.commit()
    broadcasts.schedule_broadcast(db.session, draft.id, utcnow() + timedelta(days=1))
    assert [u.words for u in library.usages_of(db.session, media.sha256)] == [
        "broadcast “Later” (scheduled)"]

    automation = automations.create_automation(db.session, automations.parse_input({
        "name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly.id},
        "steps": [{"delay": "PT0S", "subject": "Hi", "body": f"![]({url})"}]}),
        default_from=app.config["MAIL_FROM"])
    words = {u.words: u.blocks for u in library.usages_of(db.session, media.sha256)}
    assert words["automation “Welcome, step 1” (disabled)"] is False  # listed, not holding
    automations.enable(db.session, automation.id)
    words = {u.words: u.blocks for u in library.usages_of(db.session, media.sha256)}
    assert words["automation “Welcome, step 1” (enabled)"] is True
    with pytest.raises(library.InUse) as held:
        library.delete_media(db.session, media.id)
    assert "Welcome, step 1" in held.value.message and "Later" in held.value.message
    assert db.session.get(Media, media.id) is not None


@pytest.fixture
def https_media(app_config):
    """Emails load images over https only (the sanitiser drops any other `src`)."""
    app_config["MEDIA_URL"] = "https://cdn.example.com/news/"


def test_the_send_confirmation_lists_images_without_alt_and_still_offers_send(https_media,
                                                                              logged_in_client,
                                                                              app,
                                                                              postal_address):
    media = _image(logged_in_client)
    weekly = make_list(db.session, 2)
    url = library.url_of(media, base_url=app.config["BASE_URL"],
                         media_url=app.config["MEDIA_URL"])
    draft = create_draft(db.session, list_id=weekly.id, subject="Pictures",
                         body=f"![]({url})\n\n![A described one](https://x.example/a.png)")
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send").text
    assert "1 image without alt text" in page and "chart.png" in page
    assert "a.png" not in page.split("without alt text")[1].split("</section>")[0]
    assert f'href="/broadcasts/{draft.id}/edit"' in page
    assert "Sending is still possible" in page

    draft.body = "No images at all."
    db.session.commit()
    assert "without alt text" not in logged_in_client.get(f"/broadcasts/{draft.id}/send").text


# ---------------------------------------------------------------- who may

def test_viewers_see_writers_upload_only_managers_delete(app, make_person):
    viewer, writer, admin = (signed_in(app, make_person(role))
                             for role in ("viewer", "writer", "admin"))
    looked = viewer.get("/media/")
    assert looked.status_code == 200 and "Upload an image" not in looked.text
    refused = viewer.post("/media/", data={"csrf_token": csrf_token_from(
        viewer.get("/").text)})
    assert refused.status_code == 403
    assert upload(writer, still("PNG", 300, 200), "w.png", json=True).status_code == 201
    media = only_media()
    image_id = str(media.id)
    page = writer.get("/media/").text
    assert "Upload an image" in page and f"/media/{media.id}/delete" not in page
    assert writer.get(f"/media/{media.id}/delete").status_code == 403
    assert writer.post(f"/media/{media.id}/delete",
                       data={"csrf_token": page_token(writer)}).status_code == 403
    assert f"/media/{media.id}/delete" in admin.get("/media/").text
    assert admin.post(f"/media/{media.id}/delete",
                      data={"csrf_token": page_token(admin)}).status_code == 303
    assert db.session.scalar(select(func.count()).select_from(Media)) == 0
    db.session.expire_all()
    logged = db.session.execute(select(AuditEntry.action, AuditEntry.object_type,
                                       AuditEntry.object_id)
                                .order_by(AuditEntry.id)).all()
    assert [tuple(row) for row in logged if row.action.startswith("media.")] == [
        ("media.upload", "media", image_id), ("media.delete", "media", image_id)]
