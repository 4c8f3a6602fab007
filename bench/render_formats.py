"""What each way of writing costs to freeze and to render per recipient, as ratios to Markdown
in one run (broadside/mail/html_markdown.py, broadside/mail/body_formats.py).

    .venv/bin/python bench/render_formats.py [recipients] [rounds]

One issue, the same words and merge fields, written three ways:
    markdown  the Markdown body as before (bench/render.py's newsletter)
    rich      the rich-text editor's HTML for it (Trix's <div>/<br> markup, as the editor saves)
    html      the owner's own HTML: the same content laid out in tables with inline styles

Freezing runs once per revision (sanitise, layout, inline CSS, plain text); rendering once per
recipient. The rounds alternate the modes (markdown, rich, html, markdown, ...), so a machine
that slows down mid-run slows all three alike; the figure is the median of each mode's rounds.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.render import BODY
from broadside.mail.body_formats import written_as
from broadside.mail.html_markdown import markdown_to_html
from broadside.mail.rendering import CompiledRevision, freeze_content

SUBJECT = "News for {{ name or \"you\" }}, {{ attributes.city }}"


def rich_html(markdown: str) -> str:
    """The body as the rich-text editor saves it: blocks as <div>, paragraphs' lines as <br>."""
    html = markdown_to_html(markdown)
    html = re.sub(r"<p>(.*?)</p>", r"<div>\1</div>", html, flags=re.S)
    return written_as(html.replace("\n", "<br>\n"), "html")


def owners_html(markdown: str) -> str:
    """The same content as an owner's hand-made HTML email: a table per section, inline styles."""
    html = markdown_to_html(markdown)
    cells = [f'<tr><td style="padding: 8px 16px; font-family: Georgia, serif; color: #222; '
             f'line-height: 1.5" align="left" valign="top">{block}</td></tr>'
             for block in re.split(r"\n(?=<(?:p|h1|h2|ul|blockquote|pre)\b)", html)]
    return ('<table role="presentation" width="100%" cellpadding="0" cellspacing="0" '
            'style="border-collapse: collapse; background-color: #fafafa">'
            + "\n".join(cells) + "</table>")


BODIES = {"markdown": (BODY, "markdown"), "rich": (rich_html(BODY), "html"),
          "html": (owners_html(BODY), "html")}


def freeze(mode: str):
    body, body_format = BODIES[mode]
    return freeze_content(subject=SUBJECT, preheader="Our November news", body_markdown=body,
                          body_format=body_format, from_name="Acme Weekly",
                          from_email="news@example.com",
                          postal_address="Acme Ltd\n1 Main Street\nSpringfield")


def one_round(mode: str, recipients: int) -> tuple[float, float]:
    """(seconds to freeze, mean seconds to render one recipient)."""
    start = time.perf_counter()
    frozen = freeze(mode)
    frozen_in = time.perf_counter() - start
    compiled = CompiledRevision(subject=SUBJECT, html_template=frozen.html_template,
                                text_template=frozen.text_template)
    start = time.perf_counter()
    for i in range(recipients):
        compiled.render(email=f"reader{i}@example.com", name=f"Reader <{i}>",
                        attributes={"city": "Lyon", "vip": i % 3 == 0},
                        unsubscribe_url=f"https://news.example.com/u/token{i}")
    return frozen_in, (time.perf_counter() - start) / recipients


def main(recipients: int = 2000, rounds: int = 7) -> None:
    for mode, (body, _) in BODIES.items():
        print(f"{mode:9} body {len(body.encode()):6,} bytes")
    for mode in BODIES:  # warm: imports and caches, not measured
        one_round(mode, 50)
    freezes: dict[str, list[float]] = {mode: [] for mode in BODIES}
    renders: dict[str, list[float]] = {mode: [] for mode in BODIES}
    for _ in range(rounds):
        for mode in BODIES:
            frozen_in, per_recipient = one_round(mode, recipients)
            freezes[mode].append(frozen_in)
            renders[mode].append(per_recipient)
    base_freeze = statistics.median(freezes["markdown"])
    base_render = statistics.median(renders["markdown"])
    print(f"{recipients} recipients x {rounds} rounds per mode, medians")
    print("| mode | freeze (once per revision) | ratio | render per recipient | ratio |")
    print("|---|---|---|---|---|")
    for mode in BODIES:
        f, r = statistics.median(freezes[mode]), statistics.median(renders[mode])
        print(f"| {mode} | {f * 1000:.1f} ms | {f / base_freeze:.2f} | {r * 1e6:.0f} µs | "
              f"{r / base_render:.2f} |")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
