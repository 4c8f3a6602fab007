"""gunicorn's logger with Broadside's redaction (the rest of logging is `broadside.core.logs`)."""

from __future__ import annotations

import os

from gunicorn.glogging import Logger as _GunicornBaseLogger

from broadside.core.logs import REDACTED, RedactFilter, secrets_in

TRACKING_PATHS = ("/t/o/", "/t/c/")  # the analytics pixel and click routes


class GunicornLogger(_GunicornBaseLogger):
    """gunicorn's logger with the same redaction: its access log prints every request path,
    and `/u/<token>` (the unsubscribe link) and any Referer holding one must not be kept.

    Used by the Procfile: `gunicorn --logger-class webapp.logs.GunicornLogger`.
    """

    def setup(self, cfg) -> None:
        super().setup(cfg)
        redactor = RedactFilter(secrets_in(os.environ))
        for logger in (self.error_log, self.access_log):
            for handler in logger.handlers:
                handler.addFilter(redactor)

    def atoms(self, resp, req, environ, request_time) -> dict:
        atoms = super().atoms(resp, req, environ, request_time)
        for key in ("{authorization}i", "{cookie}i", "{http_authorization}e", "{http_cookie}e"):
            if key in atoms:
                atoms[key] = REDACTED
        if str(atoms.get("U", "")).startswith(TRACKING_PATHS):
            # A reader's open or click (webapp/analytics): no address of theirs in any log line.
            for key in ("h", "{x-forwarded-for}i", "{x-real-ip}i", "{remote_addr}e"):
                if key in atoms:
                    atoms[key] = "-"
        return atoms
