"""Domain exceptions. Their message is safe to show to the user; `webapp.errors` maps each
class to an HTTP status, and the worker and the CLI print the message."""

from __future__ import annotations


class DomainError(Exception):
    """An error a domain function raises; the message is safe to show to the user. `field`,
    when the error is about one input (its form field's and its API field's name), lets a
    form show the message under that input."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ValidationError(DomainError):
    status_code = 422


class NotFound(DomainError):
    status_code = 404


class Conflict(DomainError):
    status_code = 409
