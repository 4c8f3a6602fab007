"""Test clients for people of each role that do not see each other's requests.

A test's `app` fixture holds one app context for the whole test, and Flask reuses an active
app context for each request, so `g` is shared by every request the test makes: Flask-Login's
cached person (`g._login_user`) and an API token's grants (`g.broadside_granted`) would leak
from one client's request into the next client's. In production every request has an app
context of its own; `Fresh` gives each request one here too, and reads the body inside it.
"""

from __future__ import annotations

from typing import Any

from flask import Flask
from werkzeug.test import TestResponse

from tests.helpers import OWNER_PASSWORD, csrf_token_from


class Fresh:
    def __init__(self, app: Flask, person: Any = None) -> None:
        self.app, self.client, self.person = app, app.test_client(), person

    def open(self, *args: Any, **kwargs: Any) -> TestResponse:
        with self.app.app_context():
            response = self.client.open(*args, **kwargs)
            response.get_data()  # a streamed body is read while its context stands
            return response

    def get(self, *args: Any, **kwargs: Any) -> TestResponse:
        return self.open(*args, method="GET", **kwargs)

    def post(self, *args: Any, **kwargs: Any) -> TestResponse:
        return self.open(*args, method="POST", **kwargs)


def signed_in(app: Flask, person: Any) -> Fresh:
    """A client signed in as `person` (made with OWNER_PASSWORD) through the real form."""
    client = Fresh(app, person)
    page = client.get("/login")
    answer = client.post("/login", data={"email": person.email, "password": OWNER_PASSWORD,
                                         "csrf_token": csrf_token_from(page.text)})
    assert answer.status_code == 302 and not answer.location.startswith("/login"), answer.text
    return client


def csrf_of(client: Fresh) -> str:
    """A CSRF token good for `client`'s session (from a page every role may read)."""
    return csrf_token_from(client.get("/").text)
