"""Email rendering cost: freezing a revision once, compiling it once, rendering per recipient.

    .venv/bin/python bench/render.py [recipients]

Prints the time to freeze (Markdown, sanitise, layout, inline CSS, text part), to compile
the frozen templates (once per slice in the worker), and per-recipient render times.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broadside.mail.rendering import CompiledRevision, build_message, freeze_content

PARAGRAPH = (
    "This month we shipped the thing you asked for, {{ name or \"friend\" }}: faster exports, "
    "a calmer inbox and **fewer** meetings. Read the [full changelog](https://example.com/"
    "changelog?ref=newsletter) or reply to this email; a human reads every answer.\n\n"
)
BODY = (
    "# Hello {{ name | default(\"friend\", true) }}\n\n"
    "Greetings to everyone in {{ attributes.city }}.\n\n"
    + PARAGRAPH * 8
    + "## What is next\n\n- Better search\n- Dark mode for the *dashboard*\n- Quieter alerts\n\n"
    + "> The best newsletter is the one people look forward to.\n\n"
    + "{% if attributes.vip %}\n\nAs a VIP you get early access, {{ email }}.\n\n{% endif %}\n\n"
    + PARAGRAPH * 7
    + "```\nexport --format csv --since 2026-11-01\n```\n\nThanks for reading!\n"
)


def main(recipients: int = 5000) -> None:
    subject = "News for {{ name or \"you\" }}, {{ attributes.city }}"
    print(f"body: {len(BODY.encode())} bytes of Markdown, {recipients} recipients")

    freezes = []
    for _ in range(20):
        start = time.perf_counter()
        frozen = freeze_content(subject=subject, preheader="Our November news",
                                body_markdown=BODY, from_name="Acme Weekly",
                                from_email="news@example.com",
                                postal_address="Acme Ltd\n1 Main Street\nSpringfield")
        freezes.append(time.perf_counter() - start)
    print(f"freeze (once per revision): median {statistics.median(freezes) * 1000:.2f} ms; "
          f"html_template {len(frozen.html_template)} chars")

    compiles = []
    for _ in range(20):
        start = time.perf_counter()
        compiled = CompiledRevision(subject=subject, html_template=frozen.html_template,
                                    text_template=frozen.text_template)
        compiles.append(time.perf_counter() - start)
    print(f"compile (once per slice): median {statistics.median(compiles) * 1000:.2f} ms")

    renders, builds = [], []
    for i in range(recipients):
        start = time.perf_counter()
        rendered = compiled.render(email=f"reader{i}@example.com", name=f"Reader <{i}>",
                                   attributes={"city": "Lyon", "vip": i % 3 == 0},
                                   unsubscribe_url=f"https://news.example.com/u/token{i}")
        renders.append(time.perf_counter() - start)
        start = time.perf_counter()
        build_message(rendered, from_addr="Acme Weekly <news@example.com>",
                      to_addr=f"reader{i}@example.com", message_id=f"{i}@example.com",
                      headers={"List-Unsubscribe": f"<https://news.example.com/u/token{i}>",
                               "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
                      ).as_bytes()
        builds.append(time.perf_counter() - start)
    renders.sort()
    builds.sort()

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1e6

    print(f"render per recipient: mean {statistics.fmean(renders) * 1e6:.0f} us, "
          f"p50 {pct(renders, .5):.0f} us, p95 {pct(renders, .95):.0f} us, "
          f"p99 {pct(renders, .99):.0f} us; html {len(rendered.html)} chars")
    print(f"build_message + as_bytes per recipient (for reference): mean "
          f"{statistics.fmean(builds) * 1e6:.0f} us, p95 {pct(builds, .95):.0f} us")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
