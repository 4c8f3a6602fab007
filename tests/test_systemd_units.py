"""The systemd units in docs/systemd/ are ones systemd accepts: `systemd-analyze verify` on
every unit file there (web, worker, the backup's service and timer), with no warning about
them. verify wants each Exec command to exist, so the test verifies copies in which the
self-hoster's /opt/broadside is a folder of its own with those commands in place; nothing
else is changed. Debian's `systemd` package provides systemd-analyze (.ci/run installs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNITS = ROOT / "docs" / "systemd"
INSTALLED = "/opt/broadside"
EXEC = re.compile(r"^Exec\w+=[-@:+!]*(\S+)", re.MULTILINE)


def test_every_unit_file_passes_systemd_analyze_verify(tmp_path):
    units = sorted(p for p in UNITS.iterdir() if p.suffix in {".service", ".timer", ".socket",
                                                               ".path", ".target"})
    assert {"broadside-web.service", "broadside-worker.service"} <= {p.name for p in units}
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd (see .ci/run)"
    home = tmp_path / "opt-broadside"
    copies = tmp_path / "units"
    copies.mkdir()
    for unit in units:
        text = unit.read_text()
        assert INSTALLED in text or "ExecStart" not in text, f"{unit.name}: not under {INSTALLED}"
        text = text.replace(INSTALLED, str(home))
        for command in EXEC.findall(text):
            if command.startswith(str(home)):
                Path(command).parent.mkdir(parents=True, exist_ok=True)
                Path(command).write_text("#!/bin/sh\n")
                os.chmod(command, 0o755)
            else:
                assert os.access(command, os.X_OK), f"{unit.name}: {command} is not on this system"
        (copies / unit.name).write_text(text)
    found = subprocess.run([analyze, "verify", "--man=no", *sorted(map(str, copies.iterdir()))],
                           capture_output=True, text=True, timeout=60)
    ours = [line for line in (found.stdout + found.stderr).splitlines()
            if any(unit.name in line for unit in units)]
    assert found.returncode == 0 and ours == [], found.stdout + found.stderr
