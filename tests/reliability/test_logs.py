"""No secret or token in the logs of a whole working day, bad moments included.

tests/webapp/test_logging.py proves the redaction filter piece by piece (the worker, the
development server, gunicorn's access log). This runs the web exactly as the Procfile does
(gunicorn) beside real worker processes, and goes through everything at once: a wrong SMTP
password that pauses the broadcast, the owner signing in (and mistyping the password), API
calls with a good and a revoked token, the broadcast, one-click unsubscribes from a received
message, a signed webhook, and a request that crashes the view. Then it reads every log.
"""

from __future__ import annotations

import json
import uuid

import pytest
from itsdangerous import URLSafeSerializer

from broadside.core import accounts
from broadside.mail.unsubscribe_tokens import SALT
from tests.helpers import (
    OWNER_EMAIL,
    OWNER_PASSWORD,
    Browser,
    WorkerProcess,
    broadcast_status,
    csrf_token_from,
    make_list,
    wait_until,
    webhook_body,
    webhook_headers,
)
from tests.procfile import serving
from webapp.extensions import db

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning"),
]

RUN = uuid.uuid4().hex[:10]
SECRET_KEY = f"secret-key-{RUN}-0123456789"
SMTP_PASSWORD = f"smtp-right-{RUN}"
WRONG_SMTP_PASSWORD = f"smtp-wrong-{RUN}"
WEBHOOK_SECRET = f"webhook-{RUN}"
WRONG_OWNER_PASSWORD = f"owner-typo-{RUN}"
BODY_MARKER = f"body-marker-{RUN}"


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """What reaches a log line does not depend on the database."""
    return request.param


@pytest.fixture
def app_config(app_config):
    app_config.update(SECRET_KEY=SECRET_KEY, WEBHOOK_SECRET=WEBHOOK_SECRET)
    return app_config


@pytest.fixture
def gunicorn(app_config, tmp_path):
    env = {**WorkerProcess(app_config).env, "WEBHOOK_SECRET": WEBHOOK_SECRET}
    log_path = tmp_path / "web.log"
    with serving(env, log_path) as port:
        yield f"http://127.0.0.1:{port}", log_path

def test_no_secret_or_token_reaches_any_log_through_a_whole_day_of_use(
    app, app_config, owner, own_smtp, worker_factory, gunicorn
):
    base, web_log = gunicorn
    app_config["BASE_URL"] = base
    server = own_smtp(auth=("mailer", SMTP_PASSWORD))
    weekly = make_list(db.session, 20)
    _, api_token = accounts.create_token(db.session, owner.id, "zapier")
    old, revoked_token = accounts.create_token(db.session, owner.id, "old laptop")
    accounts.revoke_token(db.session, old.id)
    web = Browser(base)

    # The owner signs in, after one typo.
    login = csrf_token_from(web.request("GET", "/login")[1])
    assert web.form("/login", {"email": OWNER_EMAIL, "password": WRONG_OWNER_PASSWORD,
                               "csrf_token": login}) == 401
    assert web.form("/login", {"email": OWNER_EMAIL, "password": OWNER_PASSWORD,
                               "csrf_token": login}) == 200  # followed to the dashboard
    [session_cookie] = [c.value for c in web.jar if c.name == "session"]

    # The API, with a good token and a revoked one.
    bearer = {"Authorization": f"Bearer {api_token}", "Content-Type": "application/json"}
    status, text = web.request("POST", "/api/broadcasts", json.dumps({
        "list_id": weekly.id, "subject": "Hello {{ name }}", "body": f"News. {BODY_MARKER}"}).encode(),
        bearer)
    assert status == 201, text
    broadcast_id = json.loads(text)["id"]
    assert web.request("GET", "/api/whoami", headers={"Authorization": f"Bearer {revoked_token}"})[0] == 401

    # A wrong SMTP password: the broadcast pauses with the server's 535 in the log.
    first = worker_factory(SMTP_URL=f"smtp://mailer:{WRONG_SMTP_PASSWORD}@{server.host}:{server.port}")
    assert web.request("POST", f"/api/broadcasts/{broadcast_id}/send", b"", bearer)[0] == 202
    wait_until(lambda: broadcast_status(broadcast_id) == "paused", timeout=30)
    assert first.terminate(timeout=15) == 0

    # Fixed: the right password, Resume, the whole list.
    second = worker_factory(SMTP_URL=f"smtp://mailer:{SMTP_PASSWORD}@{server.host}:{server.port}")
    assert web.request("POST", f"/api/broadcasts/{broadcast_id}/resume", b"", bearer)[0] == 200
    wait_until(lambda: broadcast_status(broadcast_id) == "sent", timeout=30)

    # Readers leave with the links in their messages; the provider reports a bounce.
    links = [m.message["List-Unsubscribe"].strip("<> ") for m in server.messages]
    assert len(links) == 20 and all(link.startswith(base + "/u/") for link in links)
    reader = Browser(base)
    for link in links[:3]:
        path = link[len(base):]
        assert reader.request("GET", path)[0] == 200
        assert reader.request("POST", path, b"List-Unsubscribe=One-Click",
                              {"Content-Type": "application/x-www-form-urlencoded"})[0] == 200
        assert reader.request("GET", path + "/preferences")[0] == 200
    body = webhook_body(type="bounce", email="reader00019@example.com")
    assert web.request("POST", "/webhooks/events", body,
                       webhook_headers(body, WEBHOOK_SECRET))[0] == 202
    # A view that fails (a signed token whose id no database column can hold): the traceback
    # is logged, with the token in the path.
    crash = URLSafeSerializer(SECRET_KEY, salt=SALT).dumps([2**63, weekly.id, broadcast_id])
    reader.request("GET", f"/u/{crash}")
    wait_until(lambda: "/webhooks/events" in web_log.read_text(), timeout=5)
    assert second.terminate(timeout=15) == 0

    unsubscribe_tokens = [link.rsplit("/u/", 1)[1] for link in links] + [crash]
    forbidden = {
        "SECRET_KEY": SECRET_KEY, "SMTP password": SMTP_PASSWORD,
        "wrong SMTP password": WRONG_SMTP_PASSWORD, "API token": api_token,
        "revoked API token": revoked_token, "owner password": OWNER_PASSWORD,
        "mistyped owner password": WRONG_OWNER_PASSWORD, "WEBHOOK_SECRET": WEBHOOK_SECRET,
        "message body": BODY_MARKER, "session cookie": session_cookie,
        **{f"unsubscribe token {i}": token for i, token in enumerate(unsubscribe_tokens)},
    }
    logs = {"web (gunicorn)": web_log.read_text(), "worker 1": first.output, "worker 2": second.output}
    # The logs did see all of it (redacted), or this test proves nothing.
    assert "/u/[redacted]" in logs["web (gunicorn)"] and "POST /login" in logs["web (gunicorn)"]
    assert "refused our login" in logs["worker 1"] and "broadcast finished" in logs["worker 2"]
    for log_name, text in logs.items():
        for what, secret in forbidden.items():
            assert secret not in text, f"the {log_name} log contains the {what}"
