"""Benchmark: the subscriber table page at 100,000 subscribers, searching included.

Target: p95 under 100 ms. A temporary SQLite database is filled with 100,000
subscribers on three lists; the app runs under gunicorn exactly as the Procfile's `web` line
(2 workers x 4 threads); a small pool of client threads (2 by default, one per core of
these machines; `--threads 4` saturates them and measures queueing too), each with its own
keep-alive connection, asks for pages as an owner would: first page, deep keyset pages,
list/status filters, and HTMX searches (prefix and substring on email or name, including terms
that match nothing and so read the whole table).
Run: .venv/bin/python bench/subscriber_table.py [--threads N] [--rounds N]
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SUBSCRIBERS = 100_000
TARGET_P95_MS = 100.0
OWNER = ("owner@example.com", "bench password 123")
FIRST = ["Ann", "Bob", "Carla", "Dev", "Eve", "Finn", "Gus", "Hana", "Ivo", "Jo", "Kai", "Lena"]
LAST = ["Archer", "Baker", "Cole", "Dunn", "Evans", "Fox", "Grant", "Hill", "Irwin", "Jones"]
DOMAINS = ["gmail.com", "example.org", "mail.example", "posteo.de", "fastmail.com", "web.de"]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment(workdir: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLASK_")},
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.db'}",
        "SECRET_KEY": "bench-secret-key-0123456789",
        "BROADSIDE_INSTANCE_PATH": str(workdir / "instance"),
        "BROADSIDE_NAMESPACE": "bench-table",
        "PYTHONPATH": str(ROOT),
    }


def populate(workdir: Path) -> None:
    env = environment(workdir)
    subprocess.run([sys.executable, "-m", "flask", "--app", "webapp", "db", "upgrade"],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "flask", "--app", "webapp", "owner", "create",
                    OWNER[0], "--password-stdin"], cwd=ROOT, env=env, check=True,
                   input=OWNER[1] + "\n", text=True, capture_output=True)
    rng = random.Random(7)
    now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
    conn = sqlite3.connect(workdir / "bench.db")
    conn.executemany("INSERT INTO mailing_lists (id, name, description, signup_enabled, "
                     "created_at) VALUES (?, ?, '', 0, ?)",
                     [(1, "Weekly", now), (2, "Monthly", now), (3, "Offers", now)])
    subscribers, subscriptions = [], []
    for i in range(1, SUBSCRIBERS + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first.lower()}.{last.lower()}{i}@{rng.choice(DOMAINS)}"
        suppression = "bounced" if i % 97 == 0 else None
        subscribers.append((i, email, f"{first} {last}", "{}", now, suppression, 0))
        roll = rng.random()
        subscriptions.append((i, 1, "active" if roll < .8 else
                              "unconfirmed" if roll < .9 else "unsubscribed", now))
        if i % 3 == 0:
            subscriptions.append((i, 2, "active" if roll < .7 else "unsubscribed", now))
        if i % 20 == 0:
            subscriptions.append((i, 3, "active", now))
    conn.executemany("INSERT INTO subscribers (id, email, name, attributes, created_at, "
                     "suppression, soft_bounce_count) VALUES (?, ?, ?, ?, ?, ?, ?)", subscribers)
    conn.executemany("INSERT INTO subscriptions (subscriber_id, list_id, status, created_at) "
                     "VALUES (?, ?, ?, ?)", subscriptions)
    conn.commit()
    conn.execute("ANALYZE")
    conn.close()


QUERIES: dict[str, dict[str, str]] = {
    "first page": {},
    "deep page (keyset)": {"before": "23456"},
    "list + status filter": {"list": "2", "status": "unsubscribed"},
    "suppressed filter": {"status": "bounced"},
    "email prefix with @": {"q": "ann.archer1@", "match": "prefix"},
    "email/name prefix": {"q": "hana.h", "match": "prefix"},
    "name prefix": {"q": "Lena D", "match": "prefix"},
    "prefix, no match (scan)": {"q": "zzz", "match": "prefix"},
    "substring": {"q": "cole77", "match": "contains"},
    "substring, no match (scan)": {"q": "qqq", "match": "contains"},
    "substring + list filter": {"q": "posteo", "match": "contains", "list": "3"},
}


class Client:
    def __init__(self, port: int, cookie: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.cookie = cookie

    def get(self, path: str, htmx: bool) -> tuple[int, float, bytes]:
        headers = {"Cookie": self.cookie}
        if htmx:
            headers["HX-Request"] = "true"
        started = time.perf_counter()
        self.conn.request("GET", path, headers=headers)
        response = self.conn.getresponse()
        body = response.read()
        return response.status, (time.perf_counter() - started) * 1000, body


def login(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/login")
    response = conn.getresponse()
    page = response.read().decode()
    cookie = response.getheader("Set-Cookie").split(";", 1)[0]
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    body = urlencode({"email": OWNER[0], "password": OWNER[1], "csrf_token": token})
    conn.request("POST", "/login", body=body, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
    response = conn.getresponse()
    response.read()
    assert response.status == 302, response.status
    conn.close()
    return response.getheader("Set-Cookie").split(";", 1)[0]


def wait_for(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("gunicorn did not start")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30, help="times each request is asked")
    args = parser.parse_args()
    threads = args.threads
    with tempfile.TemporaryDirectory(prefix="bench-table-") as tmp:
        workdir = Path(tmp)
        started = time.perf_counter()
        populate(workdir)
        print(f"populated {SUBSCRIBERS:,} subscribers in {time.perf_counter() - started:.1f} s")
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2",
             "--threads", "4", "webapp:create_app()"],
            cwd=ROOT, env=environment(workdir), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for(port, server)
            cookie = login(port)
            jobs = [(name, "/subscribers/?" + urlencode(params), bool(params.get("q")))
                    for name, params in QUERIES.items()]
            warm = Client(port, cookie)
            for _, path, htmx in jobs:  # warm both workers' caches once
                for _ in range(2):
                    status, _, body = warm.get(path, htmx)
                    assert status == 200, (path, status, body[:300])
            work = [job for _ in range(args.rounds) for job in jobs]
            random.Random(1).shuffle(work)
            clients = [Client(port, cookie) for _ in range(threads)]
            timings: dict[str, list[float]] = {name: [] for name in QUERIES}

            def run(index: int) -> None:
                client = clients[index]
                for name, path, htmx in work[index::threads]:
                    status, elapsed, _ = client.get(path, htmx)
                    assert status == 200
                    timings[name].append(elapsed)

            wall = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(run, range(threads)))
            wall = time.perf_counter() - wall
        finally:
            server.terminate()
            server.wait(10)
            server.stderr.close()
    everything = [t for values in timings.values() for t in values]
    print(f"{len(everything)} requests, {threads} client threads, {len(everything) / wall:.0f} req/s")
    print(f"{'request':<30} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name, values in timings.items():
        print(f"{name:<30} {statistics.median(values):8.1f} {percentile(values, 95):8.1f} "
              f"{max(values):8.1f}")
    p50, p95 = statistics.median(everything), percentile(everything, 95)
    print(f"{'all':<30} {p50:8.1f} {p95:8.1f} {max(everything):8.1f}")
    ok = p95 < TARGET_P95_MS
    print(f"p95 {p95:.1f} ms (target < {TARGET_P95_MS:.0f} ms): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
