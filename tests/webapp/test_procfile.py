"""The Procfile's web process on a host: it listens on loopback unless `BIND` says otherwise
(the README says "open localhost"; a fresh install must not be reachable from the network
before its owner account exists), and two installations on one host each have gunicorn's
control socket in their own instance folder (gunicorn's default, ~/.gunicorn/gunicorn.ctl,
is one per user: the second installation's master took it from the first)."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.procfile import procfile_web
from tests.smtp_server import free_port
from webapp import REPO_ROOT

LISTEN = "0A"  # the state column of /proc/net/tcp


def listening_addresses(port: int) -> set[str]:
    """The local IPv4 addresses listening on `port`, as /proc/net/tcp gives them (hex)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if int(hex_port, 16) == port and state == LISTEN:
            found.add(address)
    return found


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.mark.slow
def test_two_installations_on_one_host_bind_as_told_and_keep_their_own_control_socket(
    app, app_config, tmp_path
):
    servers = []
    try:
        for name, bind in (("first", None), ("second", "0.0.0.0")):
            instance = tmp_path / name
            instance.mkdir()
            env = {"DATABASE_URL": app_config["DATABASE_URL"], "REDIS_URL": app_config["REDIS_URL"],
                   "SECRET_KEY": app_config["SECRET_KEY"], "BROADSIDE_INSTANCE_PATH": str(instance),
                   "BROADSIDE_NAMESPACE": f"{app_config['BROADSIDE_NAMESPACE']}-{name}",
                   "HOME": str(tmp_path), **({"BIND": bind} if bind else {})}
            port = free_port()
            argv, environ = procfile_web(port, env)
            log = open(tmp_path / f"{name}.log", "wb")
            servers.append((subprocess.Popen(argv, cwd=REPO_ROOT, env=environ, stdout=log,
                                             stderr=subprocess.STDOUT), log, port, instance))
        for _server, _log, port, _instance in servers:
            wait_until(lambda port=port: healthy(port), timeout=30)
        (_, _, first_port, first), (_, _, second_port, second) = servers
        assert listening_addresses(first_port) == {"0100007F"}  # 127.0.0.1 only
        assert listening_addresses(second_port) == {"00000000"}  # BIND=0.0.0.0: every interface
        assert (first / "gunicorn.ctl").is_socket() and (second / "gunicorn.ctl").is_socket()
        assert not (tmp_path / ".gunicorn").exists()  # nothing in the shared per-user place
    finally:
        for server, log, _port, _instance in servers:
            server.terminate()
            server.wait(15)
            log.close()
