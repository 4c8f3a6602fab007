"""HSTS when Broadside is served over https, and only then."""

from __future__ import annotations

import pytest

from tests.own_apps import own_app


@pytest.mark.parametrize(("base_url", "expected"), [
    ("https://news.example.com", "max-age=31536000"),
    ("http://localhost:5000", None),
])
def test_strict_transport_security_follows_base_url(app_config, base_url, expected):
    with own_app({**app_config, "BASE_URL": base_url}) as app:
        response = app.test_client().get("/login")
    assert response.headers.get("Strict-Transport-Security") == expected
    assert response.headers["X-Content-Type-Options"] == "nosniff"
