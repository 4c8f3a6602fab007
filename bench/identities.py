"""Sending identities and a provider's batch endpoint.

Two figures, each measured side by side with its peer in the same run (the machines are
shared and noisy, so they are ratios):

- batch provider ÷ per-message SMTP (the median of PAIRS interleaved pairs): the worker at
  SEND_DELAY_MS=0 sending N messages through
  the Postmark loopback server (tests/provider_servers.py: batches of up to 500 to
  /email/batch, one JSON message per person built from our MIME) against the same worker
  sending the same broadcast one SMTP transaction each to the discarding responder
  (bench/smtp_sink.py). Target ≥ 1.0: carrying many messages in one request must be at
  least as fast as one conversation each, with every guarantee kept (claim, re-check,
  outcome per row).
- two identities ÷ one: two identities, each paced at PACE_MS and sending to its own
  discarding responder, started together, against one of them alone, both streams threads of
  the one worker process. Each stream keeps its own pace, so the two together should send
  about twice as fast. Target ≥ 1.8.

Run alone: .venv/bin/python bench/identities.py [--backend sqlite|postgresql]
(bench/run_all.py runs it on SQLite.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import uuid

from harness import ROOT, Bench, populate
from report import Figure, at_least, median
from smtp_sink import Sink

BATCH_N = 3_000
PAIRS = 3
PACED_N = 150
PACE_MS = 20
BATCH_TARGET = 1.0
PARALLEL_TARGET = 1.8


def _identity(app, name: str, transport: str, delay_ms: int) -> int:
    from broadside.delivery.identities import service as identities
    from webapp.extensions import db

    with app.app_context():
        identity = identities.create(db.session, identities.parse_input(
            {"name": name, "from": f"{name} <{name.lower()}@bench.example>", "transport": transport,
             "delay_ms": delay_ms}))
        identity_id = identity.id
        db.session.remove()
    return identity_id


def _send(app, list_id: int, identity_id: int | None) -> int:
    """The bench's 4 KB newsletter to a list through an identity (None: the default), pressed
    "send" with no job queued: the worker's start-up repair and maintenance give it one."""
    from render import BODY

    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from webapp.extensions import db, get_jobs

    with app.app_context():
        draft = create_draft(db.session, list_id=list_id, subject="News for {{ name }}",
                             body=BODY, identity_id=identity_id)
        broadcast_id = send_broadcast(db.session, draft.id, default_from="Bench <news@bench.example>",
                                      jobs=get_jobs()).id
        db.session.remove()
    return broadcast_id


def _status(app, broadcast_id: int) -> str:
    from broadside.core.models import Broadcast
    from webapp.extensions import db

    with app.app_context():
        status = db.session.get(Broadcast, broadcast_id).status
        db.session.remove()
    return status


class Worker:
    """`flask --app webapp worker [--identity NAME]` as its own process (every stream it
    serves a thread of it)."""

    def __init__(self, bench: Bench, url: str, smtp_url: str, *names: str, delay_ms: int) -> None:
        self.log = bench.workdir / f"identities-{uuid.uuid4().hex[:6]}.log"
        argv = [sys.executable, "-m", "flask", "--app", "webapp", "worker"]
        for name in names:
            argv += ["--identity", name]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         env=bench.env(url, SMTP_URL=smtp_url, SEND_DELAY_MS=str(delay_ms),
                                                       # the fake Postmark listens on loopback
                                                       PROVIDER_ENDPOINTS_ALLOW_PRIVATE="1"),
                                         start_new_session=True)
        bench.processes.append(self.proc)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def ready(self, streams: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.output().count("lease taken") < streams:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the worker did not start:\n" + self.output()[-3000:])
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)


def _wait_sent(app, broadcast_ids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(_status(app, b) != "sent" for b in broadcast_ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"broadcasts {broadcast_ids} did not finish in {timeout:.0f} s")
        time.sleep(0.2)


def _sink_rate(stats: dict) -> float:
    span = max(stats["end_at"]) - min(stats["mail_at"])
    return stats["count"] / span if span > 0 else float("inf")


def batch_against_smtp(bench: Bench, app, url: str, ids: dict[str, int], discard: Sink) -> Figure:
    """PAIRS interleaved pairs (SMTP, then Postmark), their ratios' median: one pair is two
    windows of about a second, which a checkpoint or a neighbour's burst can halve."""
    sys.path.insert(0, str(ROOT))
    from tests.provider_servers import PostmarkServer

    pairs: list[tuple[float, float]] = []
    with PostmarkServer() as server:
        postmark = _identity(app, "Postmark", server.transport_url(), 0)
        worker = Worker(bench, url, discard.url, "default", "Postmark", delay_ms=0)
        try:
            worker.ready(2)
            for _ in range(PAIRS):
                discard.reset()
                server.reset()
                smtp_id = _send(app, ids["smtp"], None)
                _wait_sent(app, [smtp_id], 120)
                smtp_rate = _sink_rate(discard.stats())
                batch_id = _send(app, ids["batch"], postmark)
                _wait_sent(app, [batch_id], 120)
                sends = server.sends()
                if len(server.accepted) != BATCH_N:
                    raise RuntimeError(f"Postmark took {len(server.accepted)} of {BATCH_N}")
                # Steady rate: the messages of every request but the last (full batches of
                # 500), over the time from the first request's arrival to the last one's.
                pairs.append((500 * (len(sends) - 1) / (sends[-1].at - sends[0].at), smtp_rate))
        finally:
            worker.stop()
    ratios = [batch / smtp for batch, smtp in pairs]
    ratio = median(ratios)
    batch_rate, smtp_rate = pairs[ratios.index(ratio)] if ratio in ratios else pairs[0]
    return Figure("identities", f"Postmark batches ÷ per-message SMTP, {BATCH_N:,} messages",
                  ratio, "ratio", f"≥ {BATCH_TARGET:.1f}", at_least(ratio, BATCH_TARGET),
                  f"median of {PAIRS} pairs (ratios {', '.join(f'{r:.2f}' for r in ratios)}); "
                  f"batches of 500: {batch_rate:,.0f} msg/s over {len(sends)} requests; SMTP to "
                  f"the discarding responder: {smtp_rate:,.0f} msg/s (SEND_DELAY_MS=0)")


def two_against_one(bench: Bench, app, url: str, ids: dict[str, int]) -> Figure:
    first, second = Sink("discard"), Sink("discard")
    try:
        other = _identity(app, "Second", second.url, PACE_MS)
        worker = Worker(bench, url, first.url, "default", "Second", delay_ms=PACE_MS)
        try:
            worker.ready(2)
            alone_id = _send(app, ids["alone"], None)
            _wait_sent(app, [alone_id], 60)
            alone = _sink_rate(first.stats())
            first.reset()
            both = [_send(app, ids["first"], None), _send(app, ids["second"], other)]
            _wait_sent(app, both, 60)
        finally:
            worker.stop()
        a, b = first.stats(), second.stats()
        start = min(min(a["mail_at"]), min(b["mail_at"]))
        end = max(max(a["end_at"]), max(b["end_at"]))
        together = (a["count"] + b["count"]) / (end - start)
    finally:
        first.close()
        second.close()
    ratio = together / alone
    return Figure("identities", f"two identities ÷ one, each paced at {PACE_MS} ms", ratio,
                  "ratio", f"≥ {PARALLEL_TARGET:.1f}", at_least(ratio, PARALLEL_TARGET),
                  f"one identity {alone:,.1f} msg/s; two side by side {together:,.1f} msg/s in "
                  f"all ({PACED_N} messages each, {1000 / PACE_MS:.0f} msg/s allowed each)")


def run(bench: Bench, backend: str = "sqlite") -> list[Figure]:
    url = bench.sqlite_url("identities") if backend == "sqlite" else bench.postgres_url("identities")
    app = bench.app(url)
    lists = {"smtp": BATCH_N, "batch": BATCH_N, "alone": PACED_N, "first": PACED_N,
             "second": PACED_N}
    ids = populate(app, BATCH_N * 2 + PACED_N * 3, lists)
    discard = Sink("discard")
    try:
        figures = [batch_against_smtp(bench, app, url, ids, discard)]
    finally:
        discard.close()
    figures.append(two_against_one(bench, app, url, ids))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    args = parser.parse_args()
    bench = Bench()
    try:
        figures = run(bench, args.backend)
    finally:
        bench.close()
    for figure in figures:
        print(f"{figure.name}: {figure.value:.2f} {figure.unit} (target {figure.target}) "
              f"{'PASS' if figure.ok else 'FAIL'} — {figure.detail}")
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
