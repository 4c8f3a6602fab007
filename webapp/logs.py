"""Logging: one line per meaningful event, plain by default or JSON with LOG_FORMAT=json.

Worker lines carry the RQ job id and the broadcast id, set in `log_context` by the pipeline.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from flask import Flask

_context: contextvars.ContextVar[dict[str, object]] = contextvars.ContextVar(
    "broadside_log_context", default={}
)


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get()
        record.job_id = context.get("job_id", "-")
        record.broadcast_id = context.get("broadcast_id", "-")
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "job_id": getattr(record, "job_id", "-"),
            "broadcast_id": getattr(record, "broadcast_id", "-"),
        }
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload)


PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s [job=%(job_id)s broadcast=%(broadcast_id)s] %(message)s"


def configure_logging(app: Flask) -> None:
    logger = logging.getLogger("broadside")
    if getattr(logger, "_broadside_configured", None) == app.config["LOG_FORMAT"]:
        return
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    if app.config["LOG_FORMAT"] == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(PLAIN_FORMAT))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = True
    logger._broadside_configured = app.config["LOG_FORMAT"]  # type: ignore[attr-defined]
