"""When the last backup was taken: the doctor's line (and the System page's) when BACKUP_DIR
says where `flask --app webapp backup` writes its archives. The newest archive whose manifest
reads counts (broadside.core.backup.manifest.newest_backup); one older than
BACKUP_MAX_AGE_HOURS, or none at all, is a warning: it does not stop sending."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from broadside.core.backup.manifest import newest_backup
from broadside.core.timeutil import utcnow
from webapp.doctor.check import Check

NAME = "backups"


def _age(hours: float) -> str:
    if hours < 1:
        return f"{int(hours * 60)} min ago"
    if hours < 48:
        return f"{hours:.0f} h ago"
    return f"{hours / 24:.0f} days ago"


def check_backups(config: Mapping[str, Any]) -> Check | None:
    """None when backups are not configured (no BACKUP_DIR)."""
    folder = str(config.get("BACKUP_DIR") or "")
    if not folder:
        return None
    limit = int(config.get("BACKUP_MAX_AGE_HOURS") or 26)
    found = newest_backup(Path(folder))
    if found is None:
        return Check(NAME, False, f"no backup in {folder} yet",
                     "run `flask --app webapp backup PATH` into it (README: Backups, a systemd "
                     "timer)", warning=True)
    manifest = found.manifest
    hours = max(0.0, (utcnow() - manifest.created_at) / timedelta(hours=1))
    secrets = "with secrets" if manifest.secrets else "without secrets"
    summary = (f"last taken {manifest.created_at:%Y-%m-%d %H:%M} UTC ({_age(hours)}): "
               f"{found.path.name}, {manifest.database}, schema {manifest.revision}, {secrets}")
    if hours > limit:
        return Check(NAME, False, summary, f"older than BACKUP_MAX_AGE_HOURS ({limit} h): is "
                     "the backup timer running? `systemctl list-timers broadside-backup`",
                     warning=True)
    return Check(NAME, True, summary)
