"""htmx through htmx-flask (webapp.htmx): request detection and the HX-* response headers,
including the two swaps htmx-flask 0.1.0 refuses by mistake."""

from __future__ import annotations

import pytest
from htmx_flask.constants import RESWAPS

from webapp.htmx import make_response, request


@pytest.mark.parametrize("swap", ["afterbegin", "beforebegin"])
def test_the_swaps_htmx_flask_refuses_by_mistake_still_set_the_header(app, swap):
    with app.test_request_context():
        response = make_response("<li>new</li>", 201, reswap=swap, retarget="#items")
    assert response.status_code == 201
    assert response.headers["HX-Reswap"] == swap
    assert response.headers["HX-Retarget"] == "#items"


def test_other_swaps_go_through_htmx_flask_which_still_checks_them(app):
    with app.test_request_context():
        assert make_response("x", reswap="outerHTML").headers["HX-Reswap"] == "outerHTML"
        assert "HX-Reswap" not in make_response("x").headers
        with pytest.raises(ValueError):
            make_response("x", reswap="sideways")


def test_the_upstream_bug_is_still_there():
    """When this fails, htmx-flask is fixed: the wrapper's special case can go."""
    assert "afterbegin" not in RESWAPS and "beforebegin" not in RESWAPS


def test_request_htmx_tells_htmx_requests_apart(app):
    with app.test_request_context(headers={"HX-Request": "true", "HX-Boosted": "true"}):
        assert request.htmx and request.htmx.boosted
    with app.test_request_context():
        assert not request.htmx

