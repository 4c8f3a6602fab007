"""The public archive at 200 published issues: the index and an issue page over HTTP.

Target (issue 18): with 200 issues published on one list, the archive's index and its issue
pages answer with p95 < 20 ms. The population: 200 broadcasts of a ~4 KB Markdown newsletter
with merge fields, each frozen by `send_broadcast` and published by `broadside.campaigns.archive.service
.publish` (its public copy rendered once, then stored). The app is served over real HTTP
(werkzeug, threaded, loopback) and read sequentially by a visitor without a cookie: the index
(all 200 issues), issue pages chosen at random, the Atom feed, the index as a conditional GET
(If-None-Match: 304), and the index right after each of 40 publish/unpublish changes (a page
rendered afresh: rendered pages are kept per version, webapp/archive/views.py). Timings are
client-side, the HTTP round trip included.

Run alone: .venv/bin/python bench/archive.py [--requests N]   (SQLite; bench/run_all.py runs it)
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
import urllib.error
import urllib.request

from harness import Bench
from report import Figure, below, median, percentile

ISSUES = 200
P95_MS = 20.0
BODY = """# Issue {n}: what happened this week

Hi {{{{ name or "there" }}}}, here is the week at Acme{{% if attributes.city %}} from
{{{{ attributes.city }}}}{{% endif %}}.

## Product

- Exports are **twice as fast**: a 100,000-row CSV now takes under four seconds.
- A dark mode, at last, that follows your system's setting.
- Segments can match on the last time someone opened an email.

Read the notes at https://acme.example.com/changelog/2026/week-{n}.

## From the blog

> "We moved our whole newsletter in an afternoon." A reader wrote in about how they moved
> from a hosted service to their own server, and what they learnt on the way.

1. Export your list with its consent records.
2. Import it with the consent column mapped.
3. Send a test to yourself, then to a segment of ten.

```
flask --app webapp db upgrade
flask --app webapp worker
```

## Events

We will be at the **Open Source Summit** on the 14th, stand 12. Come and say hello; the
first fifty visitors get a printed copy of the style guide.

Thanks for reading, and see you next week.
"""


def populate(app, issues: int = ISSUES) -> int:
    """A list with one reader and `issues` published broadcasts; returns the list's id."""
    from sqlalchemy import update

    from broadside.campaigns.archive import service
    from broadside.campaigns.broadcasts.drafts import create_draft
    from broadside.campaigns.broadcasts.service import send_broadcast
    from broadside.core.models import Broadcast, MailingList, Subscriber, Subscription
    from webapp.extensions import db

    with app.app_context():
        session = db.session
        weekly = MailingList(name="The Acme Weekly", description="News from Acme, every Friday.",
                             signup_enabled=True)
        person = Subscriber(email="reader@bench.example", name="Reader", attributes={"city": "Oslo"})
        session.add_all([weekly, person])
        session.flush()
        session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active"))
        session.commit()
        service.set_archive(session, weekly.id, True)
        for n in range(1, issues + 1):
            draft = create_draft(session, list_id=weekly.id,
                                 subject=f"Issue {n}: the week at Acme, {{{{ name }}}}",
                                 preheader="Exports twice as fast, a dark mode, and the summit",
                                 body=BODY.format(n=n), skip_if_received_within_hours=None)
            send_broadcast(session, draft.id, default_from="Acme <news@bench.example>", jobs=None)
            # Sent as far as the archive is concerned (no worker in this benchmark).
            session.execute(update(Broadcast).where(Broadcast.id == draft.id).values(status="sent"))
            session.commit()
            service.publish(session, draft.id, True)
        list_id = weekly.id
        session.remove()
    return list_id


def get(url: str, headers: dict[str, str] | None = None) -> tuple[float, int, str]:
    started = time.perf_counter()
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            status, etag = response.status, response.headers.get("ETag", "")
    except urllib.error.HTTPError as error:  # 304 comes as an "error" from urllib
        status, etag = error.code, ""
    return (time.perf_counter() - started) * 1000, status, etag


def measure(app, list_id: int, requests: int) -> list[Figure]:
    from werkzeug.serving import make_server

    from broadside.campaigns.archive import service
    from tests.smtp_server import free_port
    from webapp.extensions import db

    with app.app_context():
        lines = service.issues(db.session, list_id)
        db.session.remove()
    assert len(lines) == ISSUES, len(lines)
    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    index_url = f"{base}/archive/{list_id}/"
    rng = random.Random(18)
    try:
        for _ in range(10):  # warm-up: templates compiled, connections made
            get(index_url)
        index = [get(index_url) for _ in range(requests)]
        chosen = [rng.choice(lines) for _ in range(requests)]
        issue = [get(f"{base}/archive/{list_id}/{line.broadcast_id}-{line.slug}") for line in chosen]
        feed = [get(f"{base}/archive/{list_id}/feed.atom") for _ in range(requests // 3)]
        etag = index[-1][2]
        conditional = [get(index_url, {"If-None-Match": etag}) for _ in range(requests // 3)]
        # Each publish or unpublish changes the page: the next view renders it afresh.
        fresh = []
        for n in range(40):
            with app.app_context():
                service.publish(db.session, lines[0].broadcast_id, n % 2 == 1)
                db.session.remove()
            fresh.append(get(index_url))
    finally:
        server.shutdown()
        thread.join(5)
    assert all(status == 200 for _, status, _ in index + issue + feed + fresh)
    assert all(status == 304 for _, status, _ in conditional)

    figures = []
    for name, results in (("index, 200 issues", index), ("issue page", issue)):
        timings = [t for t, _, _ in results]
        p95 = percentile(timings, 95)
        figures.append(Figure(
            "archive", f"{name}, p95", p95, "ms", f"p95 < {P95_MS:.0f} ms", below(p95, P95_MS),
            f"median {median(timings):.1f} ms over {len(timings)} sequential GETs over HTTP, SQLite"))
    for name, results in (("Atom feed (20 newest, full text)", feed),
                          ("index, conditional GET (304)", conditional),
                          ("index, first view after a change", fresh)):
        timings = [t for t, _, _ in results]
        figures.append(Figure("archive", f"{name}, p95", percentile(timings, 95), "ms", "", None,
                              f"median {median(timings):.1f} ms over {len(timings)} GETs"))
    return figures


def run(bench: Bench, requests: int = 300) -> list[Figure]:
    app = bench.app(bench.sqlite_url("archive"))
    started = time.perf_counter()
    list_id = populate(app)
    per_issue = (time.perf_counter() - started) / ISSUES * 1000
    figures = measure(app, list_id, requests)
    figures.append(Figure("archive", "draft, send and publish one issue (setup)", per_issue, "ms", "",
                          None, "create_draft + send_broadcast (freeze) + publish (public copy)"))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    bench = Bench()
    failed = False
    try:
        for figure in run(bench, args.requests):
            failed |= figure.ok is False
            print(f"{figure.result:5} {figure.name:45} {figure.shown():>10}  {figure.detail}")
    finally:
        bench.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
