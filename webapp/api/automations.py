"""The automations API: /api/automations (see the module's routes)."""

from __future__ import annotations

from webapp.api import bp  # noqa: F401 - routes attach to the API blueprint
