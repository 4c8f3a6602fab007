"""Benchmark: does the public sign-up form's answer time tell who is already on the list?

Serves the app over real HTTP (werkzeug, threaded, on loopback) from a migrated SQLite
database and times sign-up POSTs, alternating two cases: a newcomer (a subscriber, a
subscription and a rendered confirmation email queued in Redis) and somebody already active
on the list (a few reads). First with no floor (`SIGNUP_ANSWER_SECONDS=0`: what the time
gave away before), then with the shipped floor (webapp.steady_answers). Prints each case's
median and the ratio of the medians: with the floor it should be 1.00. Needs Redis on
127.0.0.1:6379 (the confirmation email's job). Run:
    .venv/bin/python bench/steady_answers.py [posts per case]
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # the 303 itself is the answer timed
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def sign_up(url: str, email: str) -> float:
    body = urllib.parse.urlencode({"email": email, "name": ""}).encode()
    started = time.perf_counter()
    try:
        OPENER.open(urllib.request.Request(url, data=body, method="POST"), timeout=30)
    except urllib.error.HTTPError as answer:  # the 303, unfollowed
        assert answer.code == 303, answer.code
    return (time.perf_counter() - started) * 1000


def run(workdir: Path, floor: float | None, posts: int) -> tuple[list[float], list[float]]:
    from flask_migrate import upgrade
    from werkzeug.serving import make_server

    from broadside.audience import lists
    from broadside.audience.subscribers import service as subscribers
    from broadside.core.models import Subscription
    from tests.smtp_server import free_port
    from webapp import create_app
    from webapp.extensions import db, get_redis

    namespace = f"bench-steady-{uuid.uuid4().hex[:8]}"
    config = {
        "INSTANCE_PATH": str(workdir / "instance"),
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.db'}",
        "SECRET_KEY": "bench-secret-key-0123456789",
        "BROADSIDE_NAMESPACE": namespace,
        "SIGNUP_IP_LIMIT": 10**9,  # measure the form, not the throttle's refusal
    }
    if floor is not None:
        config["SIGNUP_ANSWER_SECONDS"] = floor
    app = create_app(config, environ={})
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access line per POST otherwise
    with app.app_context():
        upgrade()
        list_id = lists.create_list(db.session, "Weekly", signup_enabled=True).id
        for i in range(posts):
            person, _ = subscribers.save_subscriber(db.session, email=f"known{i}@example.com")
            db.session.add(Subscription(subscriber_id=person.id, list_id=list_id, status="active"))
        db.session.commit()

    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/join/{list_id}"
    newcomers, known = [], []
    try:
        sign_up(url, "warm-up@example.com")
        for i in range(posts):  # alternated, so drift in the machine's load hits both alike
            newcomers.append(sign_up(url, f"new{i}@example.com"))
            known.append(sign_up(url, f"known{i}@example.com"))
    finally:
        server.shutdown()
        thread.join(5)
        with app.app_context():
            redis = get_redis()
            for key in redis.scan_iter(f"{namespace}:*"):
                redis.delete(key)
            db.session.remove()
            db.engine.dispose()
    return newcomers, known


def main() -> None:
    from webapp.signup.views import DEFAULT_ANSWER_SECONDS

    posts = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    print(f"public sign-up POST over HTTP, SQLite, {posts} per case, medians")
    for label, floor in (("no floor", 0.0), (f"floor {DEFAULT_ANSWER_SECONDS} s (shipped)", None)):
        with tempfile.TemporaryDirectory() as tmp:
            newcomers, known = run(Path(tmp), floor, posts)
        new_ms, known_ms = statistics.median(newcomers), statistics.median(known)
        print(f"  {label:26s} newcomer {new_ms:7.1f} ms   already on the list {known_ms:7.1f} ms"
              f"   ratio {new_ms / known_ms:5.2f}   (slowest newcomer {max(newcomers):6.1f} ms)")


if __name__ == "__main__":
    main()
