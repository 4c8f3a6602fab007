"""The Procfile's web command, run as the Procfile runs it: through a shell (so `${BIND}`,
`${PORT}` and the instance path expand as they do under honcho), with one gunicorn worker."""

from __future__ import annotations

import sys
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
