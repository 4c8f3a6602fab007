"""What a view adds to the audit row of its request: `note(summary=..., **details)`.

The row itself is written for every successful change by a person or a token, in the
transaction of the change (see the audit log's section in docs/ARCHITECTURE.md); a view that
knows more than its route says (a role changed from what to what, how many people a bulk
action touched) notes it here, before its change commits. Never a secret, never a
subscriber's address.
"""

from __future__ import annotations

from typing import Any

from flask import g


def note(summary: str | None = None, **details: Any) -> None:
    noted = g.setdefault("audit_note", {"summary": None, "details": {}})
    if summary is not None:
        noted["summary"] = summary
    noted["details"].update(details)


def noted() -> dict[str, Any]:
    return g.get("audit_note") or {"summary": None, "details": {}}
