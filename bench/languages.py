"""What languages cost at Send: freezing a broadcast whose readers all speak English, against
one whose readers speak English, German, French and Spanish and which has two written versions
(German and Arabic), as a ratio in one run (broadside/campaigns/content/languages.py).

    .venv/bin/python bench/languages.py [readers] [rounds] [--backend sqlite|postgresql]

The readers' languages are read once per Send (`readers_languages`: the partial index on
`subscribers.locale`), then one freeze per language a reader may get something else in: here
the default, two versions and three footers (German is covered by its version). The rounds
alternate the two broadcasts, so a machine that slows mid-run slows both; the figure is the
median of each one's rounds. The worker's side (the reader's message picked per person) is
bench/loop_ab.py against the tree before languages.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Bench, populate
from render import BODY

GERMAN = {"locale": "de", "subject": "Neues für {{ name or \"Sie\" }}", "preheader": "",
          "body": BODY}
ARABIC = {"locale": "ar", "subject": "أخبار", "preheader": "", "body": BODY}


def worker_rate(bench: Bench, app, url: str, sink, list_id: int, size: int, versions: list[dict],
                label: str) -> float:
    """The worker's rate (messages a second at the discarding server) for one broadcast."""
    from harness import broadcast_state
    from pipeline import _rate

    sink.reset()
    broadcast_id = press(app, list_id, versions, return_id=True)
    worker = bench.worker(url, smtp_url=sink.url, delay_ms=0, burst=True, label=label)
    worker.wait(timeout=60 + size / 20)
    stats = sink.stats()
    state = broadcast_state(app, broadcast_id)
    if state["status"] != "sent" or stats["count"] != size:
        raise RuntimeError(f"{label}: {stats['count']} sent, {state}; {worker.output[-2000:]}")
    return _rate(stats)


def press(app, list_id: int, versions: list[dict], return_id: bool = False) -> float:
    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from webapp.extensions import db

    with app.app_context():
        draft = create_draft(db.session, list_id=list_id, subject="News for {{ name }}", body=BODY)
        draft.versions = versions or None
        db.session.commit()
        started = time.perf_counter()
        broadcast = send_broadcast(db.session, draft.id, default_from="Bench <news@bench.example>",
                                   jobs=None)
        seconds = time.perf_counter() - started
        broadcast_id = broadcast.id
        db.session.remove()
    if not return_id:  # timed only: the worker of --send must not send it
        from harness import steer

        steer(app, broadcast_id, "cancel")
    return broadcast_id if return_id else seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("readers", type=int, nargs="?", default=20_000)
    parser.add_argument("rounds", type=int, nargs="?", default=5)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--send", type=int, default=0,
                        help="also send this many through the real worker to the discarding "
                             "server, English only against four languages, alternating")
    args = parser.parse_args()
    bench = Bench()
    try:
        url = bench.sqlite_url("languages") if args.backend == "sqlite" else bench.postgres_url(
            "languages")
        app = bench.app(url)
        names = [f"list {n}" for n in range(2 * args.rounds)]
        lists = populate(app, args.readers, dict.fromkeys(names, args.readers))
        english: list[float] = []
        several: list[float] = []
        from sqlalchemy import text

        from webapp.extensions import db
        for round_ in range(args.rounds):
            with app.app_context():  # English only: nobody has a language
                db.session.execute(text("UPDATE subscribers SET locale = NULL"))
                db.session.commit()
            english.append(press(app, lists[names[2 * round_]], []))
            with app.app_context():  # a quarter each: en, de, fr, es
                db.session.execute(text(
                    "UPDATE subscribers SET locale = CASE id % 4 WHEN 0 THEN 'en' WHEN 1 THEN 'de' "
                    "WHEN 2 THEN 'fr' ELSE 'es' END"))
                db.session.commit()
            several.append(press(app, lists[names[2 * round_ + 1]], [GERMAN, ARABIC]))
        a, b = statistics.median(english), statistics.median(several)
        print(f"Send, {args.readers:,} readers, {args.backend}: English only {a * 1000:.0f} ms, "
              f"four languages and two versions {b * 1000:.0f} ms: ratio {b / a:.2f} "
              f"(rounds: {[round(x * 1000) for x in english]} / {[round(x * 1000) for x in several]})")
        if args.send:
            from smtp_sink import Sink

            sink = Sink("discard")
            rates: dict[bool, list[float]] = {False: [], True: []}
            sends = populate(app, 0, {f"send {n}": args.send for n in range(2 * args.rounds)})
            for round_ in range(args.rounds):
                for several_languages in ((False, True) if round_ % 2 == 0 else (True, False)):
                    with app.app_context():
                        db.session.execute(text(
                            "UPDATE subscribers SET locale = CASE id % 4 WHEN 0 THEN 'en' WHEN 1 "
                            "THEN 'de' WHEN 2 THEN 'fr' ELSE 'es' END" if several_languages
                            else "UPDATE subscribers SET locale = NULL"))
                        db.session.commit()
                    name = f"send {2 * round_ + several_languages}"
                    rates[several_languages].append(worker_rate(
                        bench, app, url, sink, sends[name], args.send,
                        [GERMAN, ARABIC] if several_languages else [], f"languages-{name}"))
            a, b = statistics.median(rates[False]), statistics.median(rates[True])
            print(f"Worker, {args.send:,} messages, {args.backend}, discarding server: English "
                  f"only {a:,.0f} msg/s, four languages {b:,.0f} msg/s: ratio {b / a:.2f} "
                  f"(rounds: {[round(x) for x in rates[False]]} / {[round(x) for x in rates[True]]})")
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
