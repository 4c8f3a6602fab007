"""Behind reverse proxies (TRUSTED_PROXIES, TRUSTED_PROXY_COUNT): X-Forwarded-* are believed
only from a listed peer, the client is the right-most address no proxy of ours wrote, and the
per-client throttles, the audit trail, a session's network and /metrics' loopback check all
see that client, never the proxy. A bad TRUSTED_PROXIES stops start-up naming it. On SQLite
and PostgreSQL, with the real Redis."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from werkzeug.test import Client

from broadside.core.config import ConfigError, load_config
from broadside.core.models import AuditEntry, OwnerSession
from broadside.core.proxy_networks import parse_networks
from tests.helpers import OWNER_EMAIL
from tests.own_apps import own_app
from tests.webapp.two_factor_steps import password_step, post
from webapp.extensions import db, get_redis, namespaced
from webapp.proxies import ProxyHeaders

PROXY = "10.20.0.5"  # the reverse proxy in front (listed)
OTHER_PROXY = "10.20.0.6"
STRANGER = "198.51.100.77"  # a peer that is not a proxy of ours
CLIENT = "203.0.113.9"
SECOND_CLIENT = "203.0.113.44"


def seen_by_app(networks: str, count: int, peer: str, headers: dict[str, str]) -> tuple[str, str, str]:
    """(REMOTE_ADDR, scheme, host) as the app behind the middleware sees them."""
    def echo(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [f"{environ['REMOTE_ADDR']}|{environ['wsgi.url_scheme']}|{environ['HTTP_HOST']}".encode()]

    client = Client(ProxyHeaders(echo, parse_networks(networks), count))
    body = client.get("/", headers=headers, environ_base={"REMOTE_ADDR": peer}).get_data(as_text=True)
    addr, scheme, host = body.split("|")
    return addr, scheme, host


FORWARDED = {"X-Forwarded-For": CLIENT, "X-Forwarded-Proto": "https",
             "X-Forwarded-Host": "news.example.com"}


@pytest.mark.parametrize(("networks", "count", "peer", "headers", "seen"), [
    # A listed peer: its word is taken, for the address, the scheme and the host.
    ("10.20.0.0/24", 0, PROXY, FORWARDED, (CLIENT, "https", "news.example.com")),
    # Any other peer: the headers are ignored, the peer is the client.
    ("10.20.0.0/24", 0, STRANGER, FORWARDED, (STRANGER, "http", "localhost")),
    # A client's own X-Forwarded-For sits left of what the proxy appended: never reached.
    ("10.20.0.5", 0, PROXY, {"X-Forwarded-For": f"192.0.2.1, {CLIENT}"}, (CLIENT, "http", "localhost")),
    # Two listed proxies in a row: walked through, one hop each.
    ("10.20.0.0/24", 0, PROXY, {"X-Forwarded-For": f"192.0.2.1, {CLIENT}, {OTHER_PROXY}",
                                "X-Forwarded-Proto": "https, http"}, (CLIENT, "https", "localhost")),
    # ...but only the first when the second is not listed.
    ("10.20.0.5", 0, PROXY, {"X-Forwarded-For": f"{CLIENT}, {OTHER_PROXY}"},
     (OTHER_PROXY, "http", "localhost")),
    # Every hop listed: the left-most address is the client.
    ("10.20.0.0/24", 0, PROXY, {"X-Forwarded-For": f"10.20.0.9, {OTHER_PROXY}"},
     ("10.20.0.9", "http", "localhost")),
    # TRUSTED_PROXY_COUNT with TRUSTED_PROXIES caps the hops believed.
    ("10.20.0.0/24", 1, PROXY, {"X-Forwarded-For": f"{CLIENT}, {OTHER_PROXY}"},
     (OTHER_PROXY, "http", "localhost")),
    # TRUSTED_PROXY_COUNT alone: werkzeug's rule, every peer believed for that many hops.
    ("", 1, STRANGER, {"X-Forwarded-For": f"192.0.2.1, {CLIENT}"}, (CLIENT, "http", "localhost")),
    ("", 2, STRANGER, {"X-Forwarded-For": f"192.0.2.1, {CLIENT}"}, ("192.0.2.1", "http", "localhost")),
    ("", 2, STRANGER, {"X-Forwarded-For": CLIENT}, (STRANGER, "http", "localhost")),
    # Forms proxies write: a port, brackets, IPv6; garbage leaves the peer as the client.
    ("10.20.0.5", 0, PROXY, {"X-Forwarded-For": f"{CLIENT}:51234"}, (CLIENT, "http", "localhost")),
    ("10.20.0.5", 0, PROXY, {"X-Forwarded-For": "[2001:db8::7]:443"}, ("2001:db8::7", "http", "localhost")),
    ("fd00::/8", 0, "fd00::5", {"X-Forwarded-For": CLIENT}, (CLIENT, "http", "localhost")),
    ("10.20.0.5", 0, PROXY, {"X-Forwarded-For": "unknown"}, (PROXY, "http", "localhost")),
    # No X-Forwarded-For from a listed peer: the proxy itself is the client.
    ("10.20.0.5", 0, PROXY, {"X-Forwarded-Proto": "https"}, (PROXY, "https", "localhost")),
])
def test_whose_word_is_taken(networks, count, peer, headers, seen):
    assert seen_by_app(networks, count, peer, headers) == seen


@pytest.mark.parametrize(("value", "words"), [
    ("10.0.0.300", "'10.0.0.300' is neither"),
    ("proxy.example.com", "IP addresses or networks"),
    ("10.0.0.5, 10.0.0.1/24", "write the network as 10.0.0.0/24"),
    ("10.0.0.0/33", "is neither"),
])
def test_a_bad_list_stops_start_up_naming_the_variable(tmp_path, value, words):
    with pytest.raises(ConfigError) as excinfo:
        load_config(tmp_path / "instance", {"TRUSTED_PROXIES": value}, {})
    message = str(excinfo.value.code)
    assert message.startswith("broadside: configuration error: TRUSTED_PROXIES ")
    assert words in message


def test_a_good_list_is_kept_in_its_normal_form(tmp_path):
    config = load_config(tmp_path / "instance", {"TRUSTED_PROXIES": " 10.0.0.5 ,fd00::/8,,"}, {})
    assert config["TRUSTED_PROXIES"] == "10.0.0.5/32, fd00::/8"


@pytest.fixture
def proxied_config(app_config) -> dict:
    return {**app_config, "TRUSTED_PROXIES": "10.20.0.0/24, 127.0.0.1"}


def through(peer: str, client: str | None = None) -> dict:
    """Request arguments for a request that arrives from `peer`, forwarded for `client`."""
    headers = {"X-Forwarded-For": client} if client else {}
    return {"environ_base": {"REMOTE_ADDR": peer}, "headers": headers}


def throttle_count(bucket: str) -> int:
    value = get_redis().get(namespaced(f"throttle:{bucket}"))
    return int(value) if value else 0


def test_login_throttles_count_the_client_behind_a_listed_proxy(proxied_config, owner_password_hash):
    from broadside.core.models import Owner

    with own_app(proxied_config) as app:
        db.session.add(Owner(email=OWNER_EMAIL, password_hash=owner_password_hash))
        db.session.commit()
        web = app.test_client()
        for _ in range(3):
            assert password_step(web, OWNER_EMAIL, password="wrong", **through(PROXY, CLIENT)
                                 ).status_code == 401
        password_step(web, OWNER_EMAIL, password="wrong", **through(PROXY, SECOND_CLIENT))
        # A stranger's X-Forwarded-For is not believed: counted under the stranger.
        password_step(web, OWNER_EMAIL, password="wrong", **through(STRANGER, CLIENT))
        assert throttle_count(f"login:client:{CLIENT}") == 3
        assert throttle_count(f"login:client:{SECOND_CLIENT}") == 1
        assert throttle_count(f"login:client:{STRANGER}") == 1
        assert throttle_count(f"login:client:{PROXY}") == 0

        # The limit is the client's: over it, that client is refused, the next one is not.
        app.config["LOGIN_FAILURES_PER_CLIENT"] = 3
        refused = password_step(web, OWNER_EMAIL, **through(PROXY, CLIENT))
        assert refused.status_code == 429
        assert password_step(web, OWNER_EMAIL, **through(PROXY, SECOND_CLIENT)).status_code == 302


def test_audit_rows_and_session_networks_are_the_clients(proxied_config, owner_password_hash):
    from broadside.core.models import Owner

    with own_app(proxied_config) as app:
        db.session.add(Owner(email=OWNER_EMAIL, password_hash=owner_password_hash))
        db.session.commit()
        web = app.test_client()
        assert password_step(web, OWNER_EMAIL, **through(PROXY, CLIENT)).status_code == 302
        assert post(web, "/lists/", {"name": "Weekly"}, **through(PROXY, CLIENT)).status_code in (302, 303)
        stranger = app.test_client()
        assert password_step(stranger, OWNER_EMAIL, **through(STRANGER, CLIENT)).status_code == 302
        assert post(stranger, "/lists/", {"name": "Monthly"}, **through(STRANGER, CLIENT)
                    ).status_code in (302, 303)
        db.session.expire_all()
        rows = db.session.execute(select(AuditEntry.action, AuditEntry.address)
                                  .where(AuditEntry.action == "list.create")
                                  .order_by(AuditEntry.id)).all()
        assert [tuple(row) for row in rows] == [("list.create", CLIENT), ("list.create", STRANGER)]
        networks = db.session.scalars(select(OwnerSession.network)).all()
        assert sorted(networks) == ["198.51.100.0/24", "203.0.113.0/24"]


def test_metrics_local_check_judges_the_client(proxied_config):
    with own_app(proxied_config) as app:
        web = app.test_client()
        # Through a listed proxy: the client decides; a remote one is not local.
        assert web.get("/metrics", **through(PROXY, CLIENT)).status_code == 403
        assert web.get("/metrics", **through("127.0.0.1", CLIENT)).status_code == 403
        # A local proxy of ours forwarding for this machine, or asking itself: local.
        assert web.get("/metrics", **through("127.0.0.1", "127.0.0.1")).status_code == 200
        assert web.get("/metrics", **through("127.0.0.1")).status_code == 200
    # A loopback peer nobody listed, forwarding for someone: not local either.
    with own_app({**proxied_config, "TRUSTED_PROXIES": "10.20.0.0/24"}) as app:
        web = app.test_client()
        assert web.get("/metrics", **through("127.0.0.1", "127.0.0.1")).status_code == 403
        assert web.get("/metrics", **through("127.0.0.1")).status_code == 200


def test_the_host_a_listed_proxy_forwards_is_judged_and_a_strangers_is_ignored(proxied_config):
    bad_host = {"X-Forwarded-Host": "news..example.com"}
    with own_app(proxied_config) as app:
        web = app.test_client()
        refused = web.get("/login", headers=bad_host, environ_base={"REMOTE_ADDR": PROXY})
        assert refused.status_code == 400
        assert refused.text.startswith("Bad Host header")
        ignored = web.get("/login", headers=bad_host, environ_base={"REMOTE_ADDR": STRANGER})
        assert ignored.status_code in (200, 302) and "Bad Host" not in ignored.text



def test_urls_are_built_with_the_scheme_and_host_a_listed_proxy_forwards(proxied_config):
    from flask import request

    with own_app(proxied_config) as app:
        def where() -> str:
            return f"{request.url} {request.remote_addr}"

        where.broadside_public = True  # type: ignore[attr-defined]
        app.add_url_rule("/where-am-i", "where_am_i", where)
        web = app.test_client()
        forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "news.example.com",
                     "X-Forwarded-For": CLIENT}
        assert web.get("/where-am-i", headers=forwarded, environ_base={"REMOTE_ADDR": PROXY}
                       ).text == f"https://news.example.com/where-am-i {CLIENT}"
        assert web.get("/where-am-i", headers=forwarded, environ_base={"REMOTE_ADDR": STRANGER}
                       ).text == f"http://localhost/where-am-i {STRANGER}"
