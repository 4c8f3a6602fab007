"""The plain-text part of a real message reads as a person would type it: links as `text (URL)`,
headings on their own line and underlined, lists with `- ` and `1. `, quotes with `> `, no
logo line; merge fields and the unsubscribe line still filled in per person; tracked links
still tracked in the text. And the footer's link says "Unsubscribe", no promise of one click
(that promise belongs to the List-Unsubscribe header)."""

from __future__ import annotations

import email
import email.policy

from broadside.campaigns.analytics.rewrite import Tracker
from broadside.mail.plain_text import html_to_text
from broadside.mail.rendering import EmailDesign, compiled_revision, freeze_content, message_bytes

BODY = """# Big news for {{ name or "you" }}

Hello {{ name or "friend" }}, read [our post](https://example.com/post?id={{ attributes.id }}) today,
or see <https://example.com/auto>. Write to [us](mailto:team@example.com).

## What changed

- one thing
- two **things**
  - nested under two
1. first
2. second

> a quote
> on two lines
>
> and a second paragraph

    code line 1
      indented code

---

{% if attributes.vip %}VIP only.{% endif %}

![Chart of the month](https://example.com/chart.png)
"""
LOGO = "https://example.com/logo-mark.png"
DESIGN = EmailDesign(logo_url=LOGO, logo_alt="ACME logo", footer_text="Thanks for reading")
UNSUBSCRIBE = "https://news.example.org/u/token-for-ann"


def _message(tracking: str = "off") -> email.message.EmailMessage:
    frozen = freeze_content(subject="News", preheader="", body_markdown=BODY,
                            from_name="The Paper", from_email="news@example.org",
                            postal_address="1 Main St\nTown", design=DESIGN)
    compiled = compiled_revision("News", frozen.html_template, frozen.text_template)
    rendered = compiled.render(email="ann@example.com", name="Ann",
                               attributes={"id": 7, "vip": True}, unsubscribe_url=UNSUBSCRIBE)
    tracker = Tracker(None, 9, frozen.html_template,  # type: ignore[arg-type]
                      secret_key="plain-text-secret-0123456789", base_url="https://news.example.org",
                      clock=lambda: 1_764_590_400.0)
    rendered = tracker.apply(rendered, tracking, delivery_id=5, list_id=None)  # no list read
    raw = message_bytes(rendered, from_addr="The Paper <news@example.org>", to_addr="ann@example.com",
                        message_id="<t.1@example.org>",
                        headers={"List-Unsubscribe": f"<{UNSUBSCRIBE}>"})
    return email.message_from_bytes(raw, policy=email.policy.default)  # type: ignore[return-value]


def _part(message, kind: str) -> str:
    return message.get_body(preferencelist=(kind,)).get_content().replace("\r\n", "\n")


def test_the_plain_text_part_reads_as_typed():
    text = _part(_message(), "plain")
    lines = text.splitlines()
    assert "](" not in text and "[our post]" not in text  # no Markdown links
    # A link whose text is its address is written once.
    assert ("read our post (https://example.com/post?id=7) today, or see "
            "https://example.com/auto.") in text
    assert "Write to us (team@example.com)." in text
    # A heading stands on its own line; underlined, unless a merge field makes its length
    # differ per person.
    heading = lines.index("Big news for Ann")
    assert heading == 0 and lines[1] == ""
    sub = lines.index("What changed")
    assert lines[sub + 1] == "-" * len("What changed") and lines[sub - 1] == ""
    assert "- one thing\n- two things\n  - nested under two" in text
    assert "1. first\n2. second" in text
    assert "> a quote on two lines\n>\n> and a second paragraph" in text
    assert "    code line 1\n      indented code" in text
    assert "VIP only." in text
    assert "[Chart of the month: https://example.com/chart.png]" in text  # an image says what it was
    # No logo line in the text; the HTML keeps its logo.
    assert LOGO not in text and "ACME logo" not in text
    assert LOGO in _part(_message(), "html")
    # The footer: the sender, the owner's words, the address, and this person's unsubscribe link.
    assert text.rstrip().endswith(f"--\nThe Paper\nThanks for reading\n1 Main St\nTown\n"
                                  f"Unsubscribe: {UNSUBSCRIBE}")


def test_tracked_links_stay_tracked_in_the_plain_text():
    message = _message("aggregate")
    text, html = _part(message, "plain"), _part(message, "html")
    assert "https://example.com/auto" not in text
    # The post's address holds a merge field: counts only leaves it as it is, in both parts.
    tracked = [line for line in text.splitlines() if "/t/c/" in line]
    assert any(line.startswith("Hello Ann, read our post (https://example.com/post?id=7) today, "
                               "or see https://news.example.org/t/c/") for line in tracked)
    for url in ("https://news.example.org/t/c/",):
        assert text.count(url) == 1 and html.count(url) == 1
    assert f"Unsubscribe: {UNSUBSCRIBE}" in text  # our own link is never rewritten
    assert "team@example.com" in text


def test_the_footer_link_says_unsubscribe_without_promising_one_click():
    message = _message()
    html = _part(message, "html")
    assert f'<a href="{UNSUBSCRIBE}"' in html and ">Unsubscribe</a></p>" in html
    assert "one click" not in html.lower() and "one click" not in _part(message, "plain").lower()


def test_html_to_text_edge_cases():
    assert html_to_text('<p><a href="https://x.org/a">https://x.org/a</a></p>') == "https://x.org/a"
    assert html_to_text('<p><a href="https://x.org/a"></a> end</p>') == "https://x.org/a end"
    assert html_to_text('<ol start="3"><li>c</li><li>d</li></ol>') == "3. c\n4. d"
    assert html_to_text("<ul><li><p>loose one</p></li><li><p>loose two</p></li></ul>") == (
        "- loose one\n\n- loose two")
    assert html_to_text("<p>a<br>b   c</p><h3>Small</h3><p>x &amp; y</p>") == "a\nb c\n\nSmall\n\nx & y"
    assert html_to_text("<h1>Top</h1><h2>Next</h2>") == "Top\n===\n\nNext\n----"
    assert html_to_text("<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>") == (
        "A | B\n1 | 2")
