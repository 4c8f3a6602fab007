"""What attachments add to each copy's MIME bytes (`broadside.mail.mime.message_bytes`).

    .venv/bin/python bench/attachments_mime.py [--recipients N]

The same rendered newsletter (bench/render.py's body) built for N recipients with no
attachment, a 100 KB PDF and a 5 MB PDF, CPU time per message (`time.process_time`). Each
file's base64 part is made once (`MailAttachment.mime_part`, cached: the worker reads a
revision's files once per slice) and the first message pays it; the rest only join the
bytes. Prints µs per message and the ratio to no attachment, plus the one-time encoding.
The no-attachment path's own speed against main is bench/render_ab.py's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from render import BODY  # bench/render.py: the newsletter the worker benches send

from broadside.mail.mime import MailAttachment, RenderedEmail, message_bytes
from broadside.mail.rendering import compiled_revision, freeze_content


def pdf(size: int) -> bytes:
    return b"%PDF-1.4\n" + bytes(range(256)) * (size // 256)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=300)
    args = parser.parse_args()
    frozen = freeze_content(subject="News for {{ name }}", preheader="", body_markdown=BODY,
                            from_name="Acme", from_email="news@example.com",
                            postal_address="Acme Ltd\n1 Main Street")
    compiled = compiled_revision("News for {{ name }}", frozen.html_template, frozen.text_template)
    rendered: list[RenderedEmail] = [
        compiled.render(email=f"r{i}@example.com", name=f"Reader {i}", attributes={},
                        unsubscribe_url=f"https://news.example/u/{i}", view_url="")
        for i in range(args.recipients)]
    figures: dict[str, float] = {}
    for label, size in (("none", 0), ("100 KB PDF", 100 * 1024), ("5 MB PDF", 5 * 1024 * 1024)):
        files = [MailAttachment("programme.pdf", "application/pdf", pdf(size))] if size else []
        started = time.process_time()
        for file in files:
            file.mime_part  # noqa: B018 - the one-time encoding, timed apart
        once = time.process_time() - started
        started = time.process_time()
        total = 0
        for i, one in enumerate(rendered):
            total += len(message_bytes(one, from_addr="Acme <news@example.com>",
                                       to_addr=f"r{i}@example.com", message_id=f"<{i}@x>",
                                       headers={"List-Unsubscribe": "<https://x/u>"},
                                       attachments=files))
        per = (time.process_time() - started) / len(rendered) * 1e6
        figures[label] = per
        print(f"{label:>11}: {per:8.1f} µs a message ({total // len(rendered):,} bytes), "
              f"ratio {per / figures['none']:.2f}; encoding once {once * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
