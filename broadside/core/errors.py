"""Domain exceptions. Their message is safe to show to the user; `webapp.errors` maps each
class to an HTTP status, and the worker and the CLI print the message."""

from __future__ import annotations


class DomainError(Exception):
    """An error a domain function raises; the message is safe to show to the user."""

    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ValidationError(DomainError):
    status_code = 422


class NotFound(DomainError):
    status_code = 404


class Conflict(DomainError):
    status_code = 409
