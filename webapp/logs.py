"""gunicorn's logger with Broadside's redaction (the rest of logging is `broadside.core.logs`)."""

from __future__ import annotations

import os

from gunicorn.glogging import Logger as _GunicornBaseLogger

from broadside.core.logs import REDACTED, RedactFilter, secrets_in

TRACKING_PATHS = ("/t/o/", "/t/c/")  # the analytics pixel and click routes
# What an access-log line keeps of a reader's open or click: no address, token, user agent,
# referrer or header (a click's Location is the address it leads to). Atoms not here print "-".
TRACKING_ATOMS = ("l", "t", "s", "m", "H", "b", "B", "T", "D", "M", "L", "p")


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
        path = str(atoms.get("U", ""))
        if path.startswith(TRACKING_PATHS):
            # A reader's open or click (webapp/analytics): the line says a pixel or a link was
            # hit, its status and when; nothing that tells who, or which copy.
            kept = {key: atoms[key] for key in TRACKING_ATOMS if key in atoms}
            route = path[:len("/t/o/")] + REDACTED
            return {**kept, "h": "-", "u": "-", "U": route, "q": "", "f": "-", "a": "-",
                    "r": f"{atoms.get('m', '-')} {route} {atoms.get('H', '-')}"}
        return atoms
