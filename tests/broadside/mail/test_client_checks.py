"""What the preview says would break in mail clients (broadside.mail.client_checks), read from
the real rendered HTML."""

from __future__ import annotations

from broadside.mail.client_checks import GMAIL_CLIP_BYTES, check_email
from broadside.mail.rendering import CompiledRevision, freeze_content


def rendered(body: str, body_format: str = "markdown") -> str:
    frozen = freeze_content(subject="Hi", preheader="", body_markdown=body, from_name="Acme",
                            from_email="news@acme.example", postal_address="1 Main St",
                            body_format=body_format)
    return CompiledRevision(subject="Hi", html_template=frozen.html_template,
                            text_template=frozen.text_template).render(
        email="ann@example.com", name="Ann", attributes={},
        unsubscribe_url="https://news.example/u/x").html


def kinds(html: str) -> list[str]:
    return [check.kind for check in check_email(html)]


def test_a_clean_email_has_nothing_to_say():
    html = rendered('<p>Hello <a href="https://acme.example">there</a></p>'
                    '<img src="https://acme.example/a.png" alt="A chart" width="300">', "html")
    assert check_email(html) == []


def test_an_image_without_width_or_alt_is_named_by_its_address():
    html = rendered("![](https://acme.example/photo.jpg)")
    checks = {check.kind: check for check in check_email(html)}
    assert set(checks) == {"image-width", "image-alt"}
    assert checks["image-width"].where == ("https://acme.example/photo.jpg",)
    assert checks["image-alt"].message.startswith("1 image has no alt text")


def test_blank_alt_text_counts_as_none_and_many_are_counted_but_few_named():
    images = "".join(f'<img src="https://acme.example/{i}.png" alt=" " width="10">'
                     for i in range(5))
    checks = check_email(rendered(images, "html"))
    assert [check.kind for check in checks] == ["image-alt"]
    assert checks[0].message.startswith("5 images have no alt text")
    assert len(checks[0].where) == 3


def test_plain_http_links_are_found_and_mailto_and_https_are_not():
    html = rendered("[a](http://acme.example/a) [b](https://acme.example/b) "
                    "[c](mailto:ann@acme.example) [d](HTTP://ACME.EXAMPLE/D)")
    checks = check_email(html)
    assert [check.kind for check in checks] == ["insecure-link"]
    assert checks[0].where == ("http://acme.example/a", "HTTP://ACME.EXAMPLE/D")


def test_gmail_clipping_is_measured_in_bytes_of_the_rendered_html():
    html = rendered("x")
    room = GMAIL_CLIP_BYTES - len(html.encode())
    # Characters of two bytes each: under the limit by characters, over it by bytes.
    over = rendered("é" * (room // 2 + 10))
    assert len(over) < GMAIL_CLIP_BYTES < len(over.encode())
    assert kinds(over) == ["gmail-clipping"]
    assert kinds(rendered("é" * (room // 2 - 200))) == []
