"""Settings -> Design: the logo (checked by its bytes, served with a cache-busting URL), the
colour, width, font and footer text in every email and on the public pages, the plain-text
part keeping images, and the owner's words for the double opt-in email and sign-up pages."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from broadside.audience import lists as lists
from broadside.core.models import TransactionalMessage
from broadside.core.site_settings import get_settings, update_settings
from broadside.mail import design
from broadside.mail.rendering import CompiledRevision, EmailDesign, freeze_content
from tests import design_images as images
from tests.helpers import csrf_token_from, make_list, start_broadcast
from webapp.extensions import db


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Nothing here differs between the engines (the migration test runs on both)."""
    return request.param


def token(client) -> str:
    return csrf_token_from(client.get("/settings/design").text)


def upload(client, data: bytes, filename: str = "logo.png", content_type: str = "image/png"):
    # The body is encoded here: werkzeug's test client spools a body over 500 KB to a
    # temporary file it never closes (an unraisable ResourceWarning).
    boundary = "design-test-boundary"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="csrf_token"\r\n\r\n'
            f"{token(client)}\r\n--{boundary}\r\n"
            f'Content-Disposition: form-data; name="logo"; filename="{filename}"\r\n'
            f"Content-Type: {content_type}\r\n\r\n").encode() + data + \
        f"\r\n--{boundary}--\r\n".encode()
    return client.post("/settings/design/logo", data=body,
                       content_type=f"multipart/form-data; boundary={boundary}")


def save_look(client, **fields):
    data = {"colour": "#1f5fbf", "width": "600", "font": "system", "footer_text": "",
            "csrf_token": token(client), **fields}
    return client.post("/settings/design", data=data)


def logo_src(html: str) -> str:
    return re.search(r'src="(/brand/logo/[0-9a-f]{32}\.\w+)"', html).group(1)


# ---------------------------------------------------------------- the logo's bytes

@pytest.mark.parametrize(("data", "expected"), [
    (images.png(3, 2), ("png", 3, 2)),
    (images.jpeg_header(640, 480), ("jpg", 640, 480)),
    (images.gif_header(120, 40), ("gif", 120, 40)),
    (images.webp_vp8x(300, 100), ("webp", 300, 100)),
    (images.webp_vp8l(17, 9), ("webp", 17, 9)),
    (images.webp_vp8(250, 60), ("webp", 250, 60)),
    (b"%PDF-1.7 not an image", None),
    (b"<svg xmlns='http://www.w3.org/2000/svg'/>", None),
    (b"\x89PNG\r\n\x1a\n", None),  # a signature with no header after it
])
def test_image_type_and_size_are_read_from_the_bytes(data, expected, backend):
    info = design.sniff_image(data)
    assert (None if info is None else (info.extension, info.width, info.height)) == expected


def test_logo_upload_refuses_wrong_type_too_big_and_too_many_pixels(logged_in_client):
    client = logged_in_client
    wrong = upload(client, b"%PDF-1.7 a document renamed logo.png")
    assert wrong.status_code == 422
    assert "not a PNG, JPEG, GIF or WebP image" in wrong.text
    big = upload(client, images.png_header(100, 100) + b"\x00" * (design.MAX_LOGO_BYTES + 1))
    assert big.status_code == 422 and "at most 512 KB" in big.text
    wide = upload(client, images.png_header(3000, 200))
    assert wide.status_code == 422
    assert "3000 × 200 pixels" in wide.text and "at most 2000 pixels on each side" in wide.text
    empty = upload(client, b"", filename="")
    assert empty.status_code == 422 and "Choose an image file" in empty.text
    assert get_settings(db.session).logo_file is None


def test_logo_is_served_with_a_url_that_changes_with_it_and_long_caching(logged_in_client, app):
    client = logged_in_client
    assert upload(client, images.png(40, 20)).status_code == 303
    first = logo_src(client.get("/settings/design").text)
    served = client.get(first)
    assert served.status_code == 200 and served.mimetype == "image/png"
    assert served.data == images.png(40, 20)
    assert "immutable" in served.headers["Cache-Control"]
    assert "max-age=31536000" in served.headers["Cache-Control"]
    assert "public" in served.headers["Cache-Control"]
    etag = served.headers["ETag"]
    assert client.get(first, headers={"If-None-Match": etag}).status_code == 304
    # The emails' absolute URL is made from BASE_URL.
    assert get_settings(db.session).logo_url == f"{app.config['BASE_URL']}{first}"

    assert upload(client, images.png(40, 20, rgb=(0, 90, 200))).status_code == 303
    second = logo_src(client.get("/settings/design").text)
    assert second != first
    assert client.get(first).status_code == 200  # emails already sent keep their logo
    assert client.get("/brand/logo/../../etc/passwd").status_code == 404
    assert client.get("/brand/logo/" + "0" * 32 + ".png").status_code == 404

    page = client.get("/settings/design")
    removed = client.post("/settings/design/logo/remove",
                          data={"csrf_token": csrf_token_from(page.text)})
    assert removed.status_code == 302
    assert get_settings(db.session).logo_file is None
    assert "/brand/logo/" not in client.get("/settings/design").text


# ---------------------------------------------------------------- colour, width, font, footer

@pytest.mark.parametrize(("fields", "message"), [
    ({"colour": "red"}, "is not a colour we can use"),
    ({"colour": "#12345"}, "is not a colour we can use"),
    ({"width": "300"}, "from 480 to 800"),
    ({"width": "wide"}, "from 480 to 800"),
    ({"font": "comic-sans"}, "Choose one of the fonts"),
    ({"footer_text": "x" * 1001}, "footer text is too long"),
])
def test_a_wrong_look_is_refused_with_the_typed_values_kept(logged_in_client, fields, message):
    typed = {"footer_text": "Thanks for reading, from the Acme team.", **fields}
    response = save_look(logged_in_client, **typed)
    assert response.status_code == 422
    assert message in response.text
    assert typed["footer_text"][:40] in response.text
    settings = get_settings(db.session)
    db.session.refresh(settings)
    assert (settings.brand_colour, settings.email_width, settings.footer_text) == (
        "#1f5fbf", 600, "")


def test_contrast_chooses_readable_text_and_link_colours(backend):
    assert design.text_on("#ffe000") == "#111418"  # dark text on yellow
    assert design.text_on("#1f3a93") == "#ffffff"
    link = design.readable_on_white("#ffe000")
    assert design.contrast(link, "#ffffff") >= 4.5
    assert design.readable_on_white("#1f3a93") == "#1f3a93"  # already readable: unchanged


def test_the_sent_email_carries_logo_colour_width_font_and_footer(
        logged_in_client, app, smtp_server, run_worker_burst):
    client = logged_in_client
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street", time_zone="UTC")
    assert upload(client, images.png(400, 100)).status_code == 303
    assert save_look(client, colour="#AA3300", width="720", font="serif",
                     footer_text="You get this because you love rockets.").status_code == 303
    logo = get_settings(db.session).logo_url
    weekly = make_list(db.session, 1)
    start_broadcast(app, weekly, body="Look: ![A red rocket](https://img.example.com/rocket.png)")
    # The design changes after pressing Send: the broadcast keeps the one it was sent with.
    save_look(client, colour="#00ff00", width="500", font="mono", footer_text="Later words")
    run_worker_burst()
    message = smtp_server.wait_for(1)[0].message
    html = message.get_body(("html",)).get_content()
    text = message.get_body(("plain",)).get_content().replace("\r\n", "\n")
    assert f'src="{logo}"' in html and 'alt="Acme Weekly logo"' in html
    assert 'width="240" height="60"' in html  # 400 x 100 shown at most 240 wide
    assert "border-top: 4px solid #aa3300" in html
    assert "max-width: 720px" in html and "Georgia" in html
    assert "You get this because you love rockets." in html
    assert html.index("love rockets") < html.index("1 Main Street") < html.index("Unsubscribe")
    assert "Later words" not in html and "#00ff00" not in html
    # The plain text is read for its words: no logo line (the HTML has the logo).
    assert text.startswith("Look: ") and logo not in text
    assert "[A red rocket: https://img.example.com/rocket.png]" in text
    assert text.index("love rockets") < text.index("1 Main Street") < text.index("Unsubscribe:")


def test_plain_text_keeps_each_image_as_its_alt_text_and_url(backend):
    frozen = freeze_content(
        subject="S", preheader="", from_name="Acme", from_email="a@example.com",
        postal_address="1 Road",
        body_markdown="![Chart of **sales**](https://x.example/c.png?a=1&b=2)\n\n"
                      "![](https://x.example/plain.png)\n\n"
                      "[![Button](https://x.example/btn.png)](https://shop.example/)",
        design=EmailDesign(logo_url="https://news.example/brand/logo/a.png", logo_alt="Logo",
                           logo_width=10, logo_height=10))
    text = CompiledRevision(subject="S", html_template=frozen.html_template,
                            text_template=frozen.text_template).render(
        email="e@example.com", name="", attributes={}, unsubscribe_url="https://u.example/1").text
    assert "brand/logo" not in text  # the logo is the HTML's; the text has no logo line
    assert "[Chart of sales: https://x.example/c.png?a=1&b=2]" in text
    assert "[Image: https://x.example/plain.png]" in text
    assert "[Button: https://x.example/btn.png] (https://shop.example/)" in text


def test_the_preview_follows_the_values_being_typed(logged_in_client):
    client = logged_in_client
    pane = client.get("/settings/design/preview?colour=%23aa3300&width=700&font=serif"
                      "&footer_text=Hello+from+the+preview", headers={"HX-Request": "true"})
    assert pane.status_code == 200
    src = re.search(r'id="design-preview-frame"[^>]*src="([^"]+)"', pane.text, re.S)
    src = src or re.search(r'src="([^"]+)"[^>]*id="design-preview-frame"', pane.text, re.S)
    frame = client.get(src.group(1).replace("&amp;", "&"))
    assert "#aa3300" in frame.text and "max-width: 700px" in frame.text
    assert "Hello from the preview" in frame.text and "Georgia" in frame.text
    assert "style-src 'unsafe-inline'" in frame.headers["Content-Security-Policy"]
    wrong = client.get("/settings/design/preview?colour=blue&width=700&font=serif",
                       headers={"HX-Request": "true"})
    assert "is not a colour we can use" in wrong.text  # named, and the saved colour shown


# ---------------------------------------------------------------- the owner's words

def save_texts(client, **fields):
    from broadside.mail.signup_texts import TEXTS

    page = client.get("/settings/design")
    data = {t.key: t.default for t in TEXTS}
    data.update(fields, csrf_token=csrf_token_from(page.text))
    return client.post("/settings/design/texts", data=data)


@pytest.mark.parametrize(("fields", "message"), [
    ({"optin_subject": "Confirm {{ list_name"}, "merge-field error on line 1"),
    ({"optin_body": "Hi {{ lst_name }}"}, "Did you mean {{ list_name }}?"),
    ({"optin_body": "Hi {{ name }}"}, "cannot be used in the confirmation email"),
    ({"join_heading": "Join {{ name }}"}, "{{ name }} is not a field here."),
    ({"confirmed": ""}, "cannot be empty"),
])
def test_a_text_with_a_mistake_is_refused_with_what_to_fix(logged_in_client, fields, message):
    response = save_texts(logged_in_client, join_intro="Typed and kept", **fields)
    assert response.status_code == 422
    assert message in response.text.replace("&#34;", '"').replace("&#39;", "'")
    assert "Typed and kept" in response.text
    assert get_settings(db.session).signup_texts is None


def test_edited_opt_in_email_and_pages_are_what_people_see_and_reset_brings_back_the_default(
        logged_in_client, client, app):
    owner = logged_in_client
    weekly = lists.create_list(db.session, "Rocket News", "Launches", signup_enabled=True).id
    assert save_texts(owner, optin_subject="One click to join {{ list_name }}!",
                      optin_body="Hi {{ email }},\n\nWelcome aboard **{{ list_name }}**.",
                      join_heading="Join the {{ list_name }} crew",
                      join_intro="Launch news.\n\nNo spam, ever.",
                      check_inbox="Look for our email about {{ list_name }}.").status_code == 303
    assert upload(owner, images.png(40, 20)).status_code == 303
    save_look(owner, colour="#aa3300")

    page = owner.get(f"/join/{weekly}")
    assert "Join the Rocket News crew" in page.text
    assert '<p class="join-intro">Launch news.</p>' in page.text
    assert '<p class="join-intro">No spam, ever.</p>' in page.text
    assert re.search(r'<img src="/brand/logo/[0-9a-f]{32}\.png"', page.text)
    assert "/brand/theme/aa3300.css" in page.text
    theme = owner.get("/brand/theme/aa3300.css")
    assert "--brand: #aa3300" in theme.text and "immutable" in theme.headers["Cache-Control"]

    answer = client.post(f"/join/{weekly}", data={"email": "reader@example.org"},
                         environ_base={"REMOTE_ADDR": "198.51.100.21"}, follow_redirects=True)
    assert "Look for our email about Rocket News." in answer.text
    message = db.session.scalar(select(TransactionalMessage))
    assert message.subject == "One click to join Rocket News!"
    assert "Hi reader@example.org," in message.text and "Welcome aboard Rocket News." in message.text
    assert "<strong>Rocket News</strong>" in message.html
    assert "Confirm my subscription" in message.html and "/join/confirm/" in message.html
    assert "background-color: #aa3300" in message.html  # the button in the brand colour
    assert "/brand/logo/" in message.html and "/brand/logo/" not in message.text  # no logo line

    shown = owner.get("/settings/design/preview/confirmation")
    assert "Welcome aboard <strong>Your newsletter</strong>" in shown.text
    assert "Confirm my subscription" in shown.text and "#aa3300" in shown.text
    assert "frame-ancestors 'self'" in shown.headers["Content-Security-Policy"]

    assert save_texts(owner, optin_subject="One click to join {{ list_name }}!",
                      join_heading="Join the {{ list_name }} crew",
                      reset="optin_subject").status_code == 303
    texts = get_settings(db.session).signup_texts
    assert "optin_subject" not in texts and "join_heading" in texts
    page = owner.get("/settings/design")
    assert "Confirm your subscription to {{ list_name }}" in page.text.replace("&#34;", '"')
    assert "is back to its default" in page.text
