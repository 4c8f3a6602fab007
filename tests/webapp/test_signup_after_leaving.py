"""A confirmation link mailed before someone unsubscribed never brings them back; a new
sign-up (with its new link) does."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from broadside.core.models import Event
from tests.helpers import make_token
from tests.webapp.test_signup import confirmation_links, join, subscription, weekly  # noqa: F401
from webapp.extensions import db


def kinds() -> list[str]:
    db.session.expire_all()
    return [e.kind for e in db.session.scalars(select(Event).order_by(Event.id))]


@pytest.mark.parametrize("confirmed_first", [True, False], ids=["confirmed", "never-confirmed"])
def test_an_old_confirmation_link_does_not_resubscribe_someone_who_left(
        client, weekly, confirmed_first):  # noqa: F811
    join(client, weekly, "reader@example.com")
    [link] = confirmation_links()
    if confirmed_first:
        assert client.post(link).status_code == 200
    person = subscription("reader@example.com", weekly).subscriber_id
    left = client.post("/u/" + make_token(person, weekly))  # the unsubscribe link of an email
    assert left.status_code == 200 and "You are unsubscribed" in left.text
    before = kinds()

    page = client.get(link)
    assert page.status_code == 410
    assert "You unsubscribed from Weekly after this link was sent" in page.text
    assert "sign up again" in page.text
    assert "Confirm my subscription" not in page.text
    # The reader's own page, with the way back, not the owner's error page.
    assert "This link no longer subscribes you" in page.text
    assert f'href="/join/{weekly}"' in page.text and "Back to Broadside" not in page.text
    refused = client.post(link)
    assert refused.status_code == 410 and "sign up again" in refused.text

    after = subscription("reader@example.com", weekly)
    assert after.status == "unsubscribed" and after.unsubscribe_source == "link"
    assert kinds() == before  # nothing recorded: nothing changed


def test_signing_up_again_after_leaving_mails_a_new_link_that_resubscribes(client, weekly):  # noqa: F811
    join(client, weekly, "reader@example.com")
    [old] = confirmation_links()
    assert client.post(old).status_code == 200
    person = subscription("reader@example.com", weekly).subscriber_id
    client.post("/u/" + make_token(person, weekly))

    # At once, without waiting out the ten minutes between emails: the older link cannot
    # bring them back, so it does not count as one already sent.
    assert join(client, weekly, "reader@example.com").status_code == 200
    old_again, new = confirmation_links()
    assert old_again == old
    assert subscription("reader@example.com", weekly).status == "unsubscribed"  # until they confirm
    assert client.post(old).status_code == 404  # a newer email makes older links stop working
    assert "Confirm my subscription" in client.get(new).text
    assert client.post(new).status_code == 200
    back = subscription("reader@example.com", weekly)
    assert back.status == "active" and back.unsubscribed_at is None
    assert kinds()[-1] == "confirmed"
    assert join(client, weekly, "reader@example.com").status_code == 200
    assert len(confirmation_links()) == 2  # active again: no more emails
