"""Numbers in query strings are bounded like ids in paths: no 500 from a huge one."""

from __future__ import annotations

import pytest

from tests.helpers import make_list, start_broadcast
from webapp.extensions import db

HUGE = "99999999999999999999"


@pytest.fixture
def sent(app):
    return start_broadcast(app, make_list(db.session, 3), enqueue=False)


def pages(list_id: int, broadcast_id: int) -> list[str]:
    return [
        f"/broadcasts/?page={HUGE}",
        "/broadcasts/?page=-1",
        f"/broadcasts/{broadcast_id}/deliveries?after={HUGE}",
        f"/broadcasts/{broadcast_id}/deliveries?before={HUGE}",
        f"/subscribers/?after={HUGE}",
        f"/subscribers/?before={HUGE}",
        f"/subscribers/new?list={HUGE}",
        f"/subscribers/import?list={HUGE}",
        f"/lists/{list_id}/departures?before={HUGE}",
    ]


def test_huge_numbers_in_page_query_strings_are_ignored_not_a_500(logged_in_client, sent):
    for url in pages(sent.list_id, sent.id):
        response = logged_in_client.get(url)
        assert response.status_code == 200, url


def test_the_api_refuses_a_huge_number_with_a_message(client, api_headers, sent):
    for parameter, bounds in (("after", "0 to 2147483647"), ("limit", "1 to 10000")):
        response = client.get(f"/api/broadcasts/{sent.id}/deliveries?{parameter}={HUGE}",
                              headers=api_headers)
        assert response.status_code == 422, parameter
        assert response.get_json()["error"] == f"'{parameter}' must be a whole number from {bounds}."
    # Past the documented maximum is refused like any other list's limit (it was capped).
    assert client.get(f"/api/broadcasts/{sent.id}/deliveries?limit=50000",
                      headers=api_headers).status_code == 422
