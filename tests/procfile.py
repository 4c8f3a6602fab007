"""The Procfile's web command, run as the Procfile runs it: through a shell (so `${BIND}`,
`${PORT}` and the instance path expand as they do under honcho), with one gunicorn worker."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from webapp import REPO_ROOT


def procfile_web(port: int, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) for the web process after its `exec`, on `port`."""
    lines = (REPO_ROOT / "Procfile").read_text().splitlines()
    line = next(entry for entry in lines if entry.startswith("web:"))
    command = line.split("exec ", 1)[1]
    assert command.startswith("gunicorn ") and "--logger-class" in command
    command = command.replace("--workers 2", "--workers 1")
    venv_bin = str(Path(sys.executable).parent)  # the Procfile's gunicorn is the venv's
    environ = {**env, "PORT": str(port), "PATH": f"{venv_bin}:{env.get('PATH', '/usr/bin:/bin')}"}
    return ["sh", "-c", f"exec {command}"], environ


def web_env(config: dict, **more: str) -> dict[str, str]:
    """The web process's environment for a test app's `config`: its database, Redis, key,
    instance folder and namespace, and `more`."""
    return {"PATH": "/usr/bin:/bin", "DATABASE_URL": config["DATABASE_URL"],
            "REDIS_URL": config["REDIS_URL"], "SECRET_KEY": config["SECRET_KEY"],
            "BROADSIDE_INSTANCE_PATH": config["INSTANCE_PATH"],
            "BROADSIDE_NAMESPACE": config["BROADSIDE_NAMESPACE"], **more}


def _healthy(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return conn.recv(16).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


@contextmanager
def serving(env: dict[str, str], log_path: Path, *, startup: float = 30) -> Iterator[int]:
    """The Procfile's web process on a free port, its output (access log included) in
    `log_path`, answering /readyz before this yields the port; stopped on the way out."""
    from tests.helpers import wait_until
    from tests.smtp_server import free_port

    port = free_port()
    argv, environ = procfile_web(port, env)
    with open(log_path, "wb") as log_file:
        server = subprocess.Popen(argv, cwd=REPO_ROOT, env=environ, stdout=log_file,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(lambda: _healthy(port), timeout=startup)
            yield port
        finally:
            server.terminate()
            server.wait(15)
