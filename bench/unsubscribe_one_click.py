"""Benchmark: how fast the one-click unsubscribe answers, and what an SNS verification costs.

Builds a migrated SQLite database with 10,000 subscribers on one list, serves the app over
real HTTP (werkzeug, threaded, on loopback), and times RFC 8058 one-click POSTs: first
sequentially (latency percentiles), then from 8 threads at once (throughput). Each POST
unsubscribes a different person; a second pass repeats them (the idempotent path). Then it
times `sns.verify` for a SHA256-signed SES notification with the certificate cached.
Needs Redis on 127.0.0.1:6379 (the per-IP throttle). Run:
    .venv/bin/python bench/unsubscribe_one_click.py [subscribers] [posts]
"""

from __future__ import annotations

import base64
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def post(url: str) -> float:
    started = time.perf_counter()
    request = urllib.request.Request(url, data=b"List-Unsubscribe=One-Click", method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
        assert response.status == 200
    return (time.perf_counter() - started) * 1000


def bench_http(workdir: Path, subscribers: int, posts: int) -> None:
    from flask_migrate import upgrade
    from sqlalchemy import func, insert, select
    from werkzeug.serving import make_server

    from broadside.core.models import Event, MailingList, Subscriber, Subscription
    from broadside.mail.unsubscribe_tokens import make_token
    from tests.smtp_server import free_port
    from webapp import create_app
    from webapp.extensions import db, get_redis

    app = create_app({
        "INSTANCE_PATH": str(workdir / "instance"),
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.db'}",
        "SECRET_KEY": "bench-secret-key-0123456789",
        "BROADSIDE_NAMESPACE": "bench-unsubscribe",
        "UNSUBSCRIBE_IP_LIMIT": 10**9,  # measure the endpoint, not the throttle's refusal
    }, environ={})
    with app.app_context():
        upgrade()
        weekly = MailingList(name="Weekly")
        db.session.add(weekly)
        db.session.flush()
        db.session.execute(insert(Subscriber), [
            {"email": f"reader{i}@example.com", "name": "", "attributes": {}}
            for i in range(subscribers)])
        people = db.session.execute(select(Subscriber.id, Subscriber.created_at)
                                    .order_by(Subscriber.id)).all()
        ids = [person.id for person in people]
        db.session.execute(insert(Subscription), [
            {"subscriber_id": i, "list_id": weekly.id, "status": "active"} for i in ids])
        db.session.commit()
        secret = app.config["SECRET_KEY"]
        tokens = [make_token(person.id, weekly.id, None, joined=person.created_at, secret_key=secret)
                  for person in people[:posts * 2]]
        list_id = weekly.id

    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}/u/"
    try:
        sequential = [post(base + t) for t in tokens[:posts]]
        repeated = [post(base + t) for t in tokens[:posts]]
        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            concurrent = list(pool.map(post, [base + t for t in tokens[posts:posts * 2]]))
        wall = time.perf_counter() - started
    finally:
        server.shutdown()
        thread.join(5)

    with app.app_context():
        left = db.session.scalar(select(func.count()).select_from(Subscription).where(
            Subscription.list_id == list_id, Subscription.status == "unsubscribed"))
        recorded = db.session.scalar(select(func.count()).select_from(Event))
        for key in get_redis().scan_iter("bench-unsubscribe:*"):
            get_redis().delete(key)
        db.session.remove()
        db.engine.dispose()

    print(f"one-click POST over HTTP, SQLite, {subscribers:,} subscribers on the list")
    for name, values in (("first POST (unsubscribes)", sequential),
                         ("repeat POST (idempotent)", repeated),
                         ("8 threads at once", concurrent)):
        print(f"  {name:28s} p50 {statistics.median(values):6.1f} ms   "
              f"p95 {percentile(values, 95):6.1f} ms   max {max(values):6.1f} ms")
    print(f"  8 threads: {len(concurrent) / wall:,.0f} unsubscribes/s")
    print(f"  unsubscribed rows: {left:,}  events: {recorded:,}  (expected {posts * 2:,} each)")


def bench_sns(iterations: int = 2000) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    from cryptography.x509.oid import NameOID

    from broadside.feedback import sns

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.now(UTC)
    pem = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
           .public_key(key.public_key()).serial_number(1)
           .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=1))
           .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    url = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-bench.pem"
    message = {"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:x:1:t",
               "Timestamp": "2026-11-30T10:00:00Z", "SignatureVersion": "2",
               "SigningCertURL": url, "Message": json.dumps({"notificationType": "Bounce"})}
    signature = key.sign(sns.canonical_string(message), padding.PKCS1v15(), hashes.SHA256())
    message["Signature"] = base64.b64encode(signature).decode()
    cache = sns.CertificateCache()
    sns.verify(message, lambda _url: pem, cache)
    started = time.perf_counter()
    for _ in range(iterations):
        sns.verify(message, lambda _url: pem, cache)
    per = (time.perf_counter() - started) / iterations * 1e6
    print(f"SNS signature check (RSA-2048, SHA256, certificate cached): {per:.0f} µs each")


def main() -> None:
    subscribers = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    posts = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    with tempfile.TemporaryDirectory() as tmp:
        bench_http(Path(tmp), subscribers, posts)
    bench_sns()


if __name__ == "__main__":
    main()
