"""The worker's per-message build, before and after, side by side in one process.

    .venv/bin/python bench/render_ab.py [--base REF] [--recipients N] [--rounds R]

Loads `broadside` as it is at REF (default: main) from `git archive` into a temporary
directory, then the working tree's own, and times the same chain `jobs/recheck.py`'s
`Recheck.prepare` runs per recipient (unsubscribe token and URL, "View in your browser" link,
the revision filled in, reader tracking, the MIME bytes, the SMTP transport's dot-stuffing)
over the same recipients, rounds interleaved (A, B, A, B...), CPU time per message
(`time.process_time`). Every message of B is compared with A's, byte for byte, with the MIME
boundary and the Date held fixed on both sides. Prints per-message µs and the ratio B/A for
tracking off and on, view link off and on. The body is bench/render.py's newsletter, the one
the worker benches (bench/wire.py) send.
"""

from __future__ import annotations

import argparse
import email.utils
import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from render import BODY  # noqa: E402  (bench/render.py: the newsletter the worker benches send)

for _name in [n for n in sys.modules if n == "broadside" or n.startswith("broadside.")]:
    del sys.modules[_name]  # bench/render.py imported the working tree's: each side loads its own

SUBJECT = "News for {{ name or \"you\" }}, {{ attributes.city }}"
SECRET = "bench-secret-key-0123456789abcdef0123"
BASE_URL = "https://news.example.com"
MODULES = ("broadside.mail.rendering", "broadside.mail.mime", "broadside.mail.unsubscribe_tokens",
           "broadside.campaigns.archive.links", "broadside.campaigns.analytics.rewrite",
           "broadside.delivery.smtp")


def load(path: Path) -> SimpleNamespace:
    """broadside's modules from the tree at `path`, kept under their own names and dropped
    from sys.modules afterwards, so the next load imports its own copy."""
    # An editable install's finder would answer `import broadside` with the working tree
    # whatever sys.path says: set aside while loading.
    editable = [f for f in sys.meta_path if type(f).__module__.startswith("__editable__")]
    for finder in editable:
        sys.meta_path.remove(finder)
    sys.path.insert(0, str(path))
    try:
        mods = {name.rsplit(".", 1)[1]: importlib.import_module(name) for name in MODULES}
        assert Path(mods["mime"].__file__).is_relative_to(path), mods["mime"].__file__
    finally:
        sys.path.remove(str(path))
        sys.meta_path.extend(editable)
        for name in [n for n in sys.modules if n == "broadside" or n.startswith("broadside.")]:
            del sys.modules[name]
    return SimpleNamespace(**mods)


def recipients(count: int, ascii_only: bool) -> list[tuple[int, str, str, dict, str]]:
    """Mixed: some names and cities not ASCII (an encoded Subject), some with "&" and "<"
    (escaped in the HTML), some names empty. ascii_only: bench/wire.py's kind of people."""
    cities = ["Lyon", "Oslo"] * 2 if ascii_only else ["Lyon", "Malmö & <Lund>", "Oslo", "São Paulo"]
    out = []
    for i in range(count):
        name = f"Reader {i}"
        if not ascii_only:
            name = "Zoë Ünïcode" if i % 7 == 3 else ("" if i % 11 == 5 else name)
        out.append((i + 1, f"reader{i:06d}@wire.example", name,
                    {"city": cities[i % 4], "vip": i % 3 == 0},
                    "2026-01-02 03:04:05.678901" if i % 2 else "2026-01-02 03:04:05"))
    return out


def builder(m: SimpleNamespace, tracking: str, view: bool):
    """One side's per-recipient build, as Recheck.prepare runs it."""
    m.mime.secrets = SimpleNamespace(token_hex=lambda n: "b0" * n)  # the boundary, fixed
    frozen = m.rendering.freeze_content(
        subject=SUBJECT, preheader="Our news", body_markdown=BODY, from_name="Acme Weekly",
        from_email="news@example.com", postal_address="Acme Ltd\n1 Main Street")
    compiled = m.rendering.compiled_revision(SUBJECT, frozen.html_template, frozen.text_template)
    tokens = m.unsubscribe_tokens.Tokens(SECRET)
    views = m.links.ViewLinks(7, SECRET, BASE_URL) if view else None
    tracker = m.rewrite.Tracker(None, 7, frozen.html_template, secret_key=SECRET,
                                base_url=BASE_URL, clock=lambda: 1_764_590_400.0)
    wire = m.smtp.SmtpTransport.wire
    from_header = "Acme Weekly <news@example.com>"

    def build(delivery_id: int, subscriber_id: int, email: str, name: str, attributes: dict,
              joined: str) -> bytes:
        link = m.unsubscribe_tokens.unsubscribe_url(tokens.make(subscriber_id, 3, 7, joined), BASE_URL)
        view_url = views.url(delivery_id, subscriber_id, joined) if views else ""
        rendered = compiled.render(email=email, name=name, attributes=attributes,
                                   unsubscribe_url=link, view_url=view_url)
        rendered = tracker.apply(rendered, tracking, delivery_id=delivery_id, list_id=3)
        payload = m.mime.message_bytes(
            rendered, from_addr=from_header, to_addr=email,
            message_id=f"<broadside.d{delivery_id}.b7@example.com>",
            headers={"List-Unsubscribe": f"<{link}>",
                     "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"})
        return wire(payload)

    return build


def run(people: list, build) -> tuple[float, list[bytes]]:
    out = []
    started = time.process_time()
    for index, (subscriber_id, address, name, attributes, joined) in enumerate(people):
        out.append(build(1000 + index, subscriber_id, address, name, attributes, joined))
    return (time.process_time() - started) / len(people) * 1e6, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--recipients", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ascii", action="store_true", help="only ASCII names and cities")
    parser.add_argument("--layout-changed", action="store_true",
                        help="the email's layout changed on purpose: time both, say both sizes, "
                             "do not require the same bytes")
    args = parser.parse_args()
    # The Date, fixed for both sides (this process sends nothing)
    email.utils.formatdate = lambda *a, **k: "Tue, 01 Dec 2026 12:00:00 GMT"
    folder = Path(tempfile.mkdtemp(prefix="render_ab_"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "broadside",
                                  "templates"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        before, after = load(folder), load(ROOT)
        people = recipients(args.recipients, args.ascii)
        print(f"{args.recipients} {'ASCII ' if args.ascii else ''}recipients x {args.rounds} "
              f"rounds, A = {args.base}, "
              f"B = working tree; load average {open('/proc/loadavg').read().split()[:3]}")
        for tracking in ("off", "aggregate"):
            for view in (False, True):
                a, b = builder(before, tracking, view), builder(after, tracking, view)
                times: dict[str, list[float]] = {"A": [], "B": []}
                for round_ in range(args.rounds):  # A B, then B A: drift favours neither
                    if round_ % 2:
                        tb, out_b = run(people, b)
                        ta, out_a = run(people, a)
                    else:
                        ta, out_a = run(people, a)
                        tb, out_b = run(people, b)
                    times["A"].append(ta)
                    times["B"].append(tb)
                    if out_a != out_b and not args.layout_changed:
                        bad = next(i for i, (x, y) in enumerate(zip(out_a, out_b, strict=True)) if x != y)
                        print(f"DIFFERENT BYTES: tracking {tracking}, view {view}, "
                              f"recipient {bad}")
                        return 1
                ma, mb = statistics.median(times["A"]), statistics.median(times["B"])
                ratios = sorted(y / x for x, y in zip(times["A"], times["B"], strict=True))
                print(f"tracking {tracking:9} view {'on ' if view else 'off'}: "
                      f"A {ma:6.0f} µs, B {mb:6.0f} µs per message (medians), B/A per round: "
                      f"median {statistics.median(ratios):.2f}, {ratios[0]:.2f}–{ratios[-1]:.2f}; "
                      + (f"{len(out_a[0]):,} -> {len(out_b[0]):,} bytes" if out_a != out_b
                         else f"{len(out_b[0]):,} bytes, identical"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
