"""A "View in your browser" link opens one reader's copy with their name and address in it, so
its token is as much a secret as an unsubscribe token: the access log never keeps it, proved
on gunicorn as the Procfile runs it (and on the redacting filter itself)."""

from __future__ import annotations

import re
import urllib.request

import pytest

from broadside.campaigns.archive import service as archive
from broadside.campaigns.archive.links import ViewTokens
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.logs import RedactFilter
from tests.helpers import make_list, wait_until
from tests.procfile import serving, web_env
from webapp.extensions import db, get_jobs


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """The log line is the same on both databases."""
    return request.param


def http(url: str, headers: dict | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def test_the_redacting_filter_blanks_a_view_token_in_paths_and_referers(app):
    token = ViewTokens(app.config["SECRET_KEY"]).make(41, 7, 12, "2026-11-30 18:00:00")
    line = (f'127.0.0.1 - - [05/Dec/2026:14:00:00 +0000] "GET /view/{token} HTTP/1.1" 200 5120 '
            f'"https://mail.example.com/view/{token}" "Mozilla/5.0"')
    redacted = RedactFilter().redact(line)
    assert token not in redacted
    assert redacted.count("/view/[redacted]") == 2
    # The owner's own pages keep their paths: only the public view route carries a token.
    owner_line = '"POST /archive/broadcasts/3/view-link HTTP/1.1" 302'
    assert RedactFilter().redact(owner_line) == owner_line


@pytest.mark.slow
def test_gunicorn_never_logs_a_view_in_browser_token(app, app_config, smtp_server,
                                                     run_worker_burst, tmp_path):
    weekly = make_list(db.session, 1)
    draft = create_draft(db.session, list_id=weekly.id, subject="Hello", body="The news.")
    archive.set_view_link(db.session, draft.id, True)
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker_burst()
    text_part = smtp_server.messages[0].message.get_body(("plain",)).get_content()
    token = re.search(r"View in your browser: \S+/view/(\S+)", text_part).group(1)

    log_path = tmp_path / "gunicorn.log"
    with serving(web_env(app_config), log_path) as port:
        base = f"http://127.0.0.1:{port}"
        # The reader opens their copy, then follows a link in it to this same site.
        assert http(f"{base}/view/{token}") == 200
        assert http(f"{base}/healthz", headers={"Referer": f"{base}/view/{token}"}) == 200
        wait_until(lambda: "GET /healthz" in log_path.read_text(), timeout=5)  # startup asks /readyz
    text = log_path.read_text()
    assert '"GET /view/[redacted] HTTP/1.1" 200' in text
    assert f'"{base}/view/[redacted]"' in text
    assert token not in text
