"""The one place that maps domain exceptions (`broadside.core.errors`) and HTTP errors to responses."""

from __future__ import annotations

from flask import Flask, g, jsonify, render_template, request
from flask_babel import refresh
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from broadside.core.errors import DomainError
from broadside.core.i18n import _, set_locale
from webapp.i18n import request_locale


def _wants_json() -> bool:
    return request.path.startswith("/api/") or request.path.startswith("/webhooks/")


def _speak_the_request() -> None:
    """A refusal raised before the request chose its language (the CSRF check runs first)
    is written in the language the request would have had."""
    if "locale_token" not in g:
        g.locale_token = set_locale(request_locale())  # reset by webapp/i18n.py's teardown
        refresh()


def _error_response(status: int, message: str, field: str | None = None,
                    headers: dict[str, str] | None = None):
    if _wants_json():
        # `field`: the input the refusal is about, when it is about one (a body field's path
        # like `steps[2].body`, a query parameter's name), for a client to point at.
        body = jsonify(error=message, field=field) if field else jsonify(error=message)
        return body, status, headers or {}
    return render_template("error.html", status=status, message=message), status, headers or {}


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(DomainError)
    def domain_error(exc: DomainError):
        _speak_the_request()
        return _error_response(exc.status_code, exc.message, exc.field)

    @app.errorhandler(CSRFError)
    def csrf_error(exc: CSRFError):
        _speak_the_request()
        return _error_response(400, _("This form has expired or was not sent from Broadside. "
                                      "Reload the page and try again."))

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        _speak_the_request()
        # In the request's language (the API's is English).
        messages = {
            400: _("The request could not be understood."),
            401: _("Authentication required."),
            403: _("You are not allowed to do that."),
            404: _("There is nothing here."),
            405: _("That method is not allowed here."),
            413: _("That upload is larger than this server accepts."),
            422: _("That could not be processed."),
            429: _("Too many attempts. Wait a little and try again."),
            500: _("Something went wrong on our side."),
        }
        message = exc.description if exc.code in (400, 422) and exc.description else None
        # The exception's own headers (a 405's Allow, a 401's WWW-Authenticate), not its
        # Content-Type: the body is ours.
        headers = {name: value for name, value in exc.get_headers()
                   if name.lower() != "content-type"}
        return _error_response(exc.code or 500, message or messages.get(exc.code or 500, exc.name),
                               headers=headers)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        app.logger.exception("unhandled error on %s %s", request.method, request.path)
        return _error_response(500, _("Something went wrong on our side. It has been logged."))
