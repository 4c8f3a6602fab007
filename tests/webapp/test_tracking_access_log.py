"""The access log keeps of a reader's open or click only the method, `/t/o/[redacted]` or
`/t/c/[redacted]`, the protocol, the status, the size and the time (webapp/logs.py): no token
(a click token holds its link's address, which held the reader's own before counts only left
such links alone, and copies sent then are still read), no address, user agent, referrer,
request header or Location. Proved on gunicorn as the Procfile runs it, and on a line as
gunicorn formats it with every atom a deployer could ask for."""

from __future__ import annotations

import http.client
import re
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import insert, update

from broadside.campaigns.analytics.tokens import TrackingTokens, slot_of
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.core.models import Broadcast, TrackedLink
from tests.helpers import make_list, wait_until
from tests.procfile import serving, web_env
from webapp.extensions import db

READER_EMAIL = "reader-7f3a@example.com"  # inside a click token signed as copies sent before were
READER_AGENT = "Mozilla/5.0 ReaderMail-9c1e"
READER_REFERER = "https://webmail.example/inbox/message-4411"
READER_ADDRESS = "203.0.113.44"


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """The access log does not depend on the database."""
    return request.param


def tracked_broadcast(app) -> tuple[str, str]:
    """(pixel path, click path) of a sent broadcast counted in aggregate, the click token
    carrying a reader's address in its link, as counts-only copies sent before this did."""
    weekly = make_list(db.session, 0)
    draft = create_draft(db.session, list_id=weekly.id, subject="S", body="B")
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id)
                       .values(tracking="aggregate", status="sent"))
    db.session.execute(insert(TrackedLink).values(
        broadcast_id=draft.id, position=0, url="https://acme.example/people/{{ email }}",
        clicks=0, bot_clicks=0))
    db.session.commit()
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    slot = slot_of(time.time()) - 360
    return (f"/t/o/{tokens.open_token(draft.id, slot)}.gif",
            "/t/c/" + tokens.click_token(draft.id, 0, f"https://acme.example/people/{READER_EMAIL}", slot))


def get(host: str, port: int, path: str, headers: dict[str, str]) -> int:
    """One GET that does not follow a redirect."""
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def assert_names_nobody(line: str, *tokens: str) -> None:
    for secret in (READER_EMAIL, READER_AGENT, READER_REFERER, READER_ADDRESS, "127.0.0.1", *tokens):
        assert secret not in line, (secret, line)


@pytest.mark.slow
def test_gunicorn_as_the_procfile_runs_it_logs_no_token_agent_or_referrer_on_tracking_paths(
        app, app_config, tmp_path):
    pixel, click = tracked_broadcast(app)
    reader = {"User-Agent": READER_AGENT, "Referer": READER_REFERER, "X-Forwarded-For": READER_ADDRESS}
    log_path = tmp_path / "gunicorn.log"
    with serving(web_env(app_config), log_path) as port:
        assert get("127.0.0.1", port, pixel, reader) == 200
        assert get("127.0.0.1", port, click, reader) == 302
        assert get("127.0.0.1", port, "/healthz", reader) == 200  # another route, for contrast
        wait_until(lambda: "GET /healthz" in log_path.read_text(), timeout=5)  # startup asks /readyz
    text = log_path.read_text()
    [opened] = [line for line in text.splitlines() if "/t/o/" in line]
    [clicked] = [line for line in text.splitlines() if "/t/c/" in line]
    # gunicorn's default format: address, ident, user, time, request line, status, size,
    # referrer, user agent. Kept: the time, the route, the status, the size.
    kept = r'- - - \[[^\]]+\] "GET /t/{} HTTP/1\.1" {} "-" "-"'
    assert re.fullmatch(kept.format(r"o/\[redacted\]", r"200 \d+"), opened), opened
    assert re.fullmatch(kept.format(r"c/\[redacted\]", r"302 \d+"), clicked), clicked
    for line in (opened, clicked):
        assert_names_nobody(line, pixel.split("/")[-1], click.split("/")[-1])
    for secret in (pixel.split("/")[-1], click.split("/")[-1], READER_EMAIL):
        assert secret not in text  # in no line at all, error log included
    # The other route logs as it always did: this is what the tracking lines leave out.
    assert READER_AGENT in text and READER_REFERER in text


def test_every_atom_gunicorn_offers_is_blank_on_tracking_paths(app, tmp_path):
    from gunicorn.config import Config

    from webapp.logs import GunicornLogger

    pixel, click = tracked_broadcast(app)
    config = Config()
    config.set("accesslog", str(tmp_path / "access.log"))
    # Everything a deployer might put in --access-logformat that could say who, or which copy.
    config.set("access_log_format", " ".join([
        "%(h)s", "%(t)s", '"%(r)s"', "%(U)s", "%(q)s", "%(s)s", "%(b)s", '"%(f)s"', '"%(a)s"',
        "%({user-agent}i)s", "%({referer}i)s", "%({x-forwarded-for}i)s", "%({cookie}i)s",
        "%({location}o)s", "%({raw_uri}e)s", "%({path_info}e)s", "%({http_user_agent}e)s",
        "%({remote_addr}e)s", "%(M)s"]))
    logger = GunicornLogger(config)
    for path in (pixel, click, "/healthz"):
        location = f"https://acme.example/people/{READER_EMAIL}" if path == click else None
        headers = [("User-Agent", READER_AGENT), ("Referer", READER_REFERER),
                   ("X-Forwarded-For", READER_ADDRESS), ("Cookie", "session=abc")]
        request = SimpleNamespace(headers=headers, method="GET", path=path, query="",
                                  uri=path, version=(1, 1))
        response = SimpleNamespace(status="302 Found" if location else "200 OK", sent=43,
                                   headers=[("Location", location)] if location else [])
        environ = {"REMOTE_ADDR": READER_ADDRESS, "REQUEST_METHOD": "GET", "RAW_URI": path,
                   "PATH_INFO": path, "QUERY_STRING": "", "SERVER_PROTOCOL": "HTTP/1.1",
                   "HTTP_USER_AGENT": READER_AGENT, "HTTP_REFERER": READER_REFERER}
        logger.access(response, request, environ, timedelta(milliseconds=12))
    for handler in logger.access_log.handlers:
        handler.flush()
    opened, clicked, health = (tmp_path / "access.log").read_text().splitlines()
    assert re.fullmatch(r'- \[[^\]]+\] "GET /t/o/\[redacted\] HTTP/1\.1" /t/o/\[redacted\]  200 43 '
                        r'"-" "-"( -){9} 12', opened), opened
    assert '"GET /t/c/[redacted] HTTP/1.1" /t/c/[redacted]  302 43' in clicked, clicked
    for line in (opened, clicked):
        assert_names_nobody(line, pixel.split("/")[-1], click.split("/")[-1], "session=abc")
    assert READER_AGENT in health and READER_ADDRESS in health  # other routes: as configured
