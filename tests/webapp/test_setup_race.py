"""The first-run /setup page creates one owner, even when several browsers submit it at once."""

from __future__ import annotations

import threading

from sqlalchemy import func, select

from broadside.core.models import Owner
from tests.helpers import Browser, csrf_token_from
from webapp.extensions import db

BROWSERS = 8


def test_parallel_setups_create_exactly_one_owner(live_server):
    browsers = [Browser(live_server.url) for _ in range(BROWSERS)]
    tokens = []
    for browser in browsers:
        status, page = browser.request("GET", "/setup")
        assert status == 200
        tokens.append(csrf_token_from(page))
    start = threading.Barrier(BROWSERS)
    answers: dict[int, tuple[int, str]] = {}

    def submit(n: int) -> None:
        start.wait(10)
        answers[n] = browsers[n].submit("/setup", {
            "email": f"owner{n}@example.com", "password": "long enough pw",
            "confirm": "long enough pw", "csrf_token": tokens[n],
        })

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(BROWSERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == BROWSERS

    db.session.expire_all()
    owners = db.session.scalars(select(Owner)).all()
    db.session.commit()
    assert len(owners) == 1, [o.email for o in owners]
    winner = int(owners[0].email.removeprefix("owner").split("@")[0])
    statuses = {n: status for n, (status, _) in answers.items()}
    # The winner followed the redirect to the dashboard, signed in.
    assert statuses.pop(winner) == 200
    assert "Welcome to Broadside" in answers[winner][1] or "first list" in answers[winner][1]
    # Everybody else got the usual answer of a set-up site: the page is gone (404), no 500.
    assert set(statuses.values()) == {404}, statuses
    assert db.session.scalar(select(func.count()).select_from(Owner)) == 1
