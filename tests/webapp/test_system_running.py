"""The System page shows the values each stream's worker runs on (said by the stream beside its
lease: broadside.delivery.streams.record_running), and says when the saved ones differ:
"applying at the next tick" for an identity, "restart it" for the default (whose values are
the worker's own environment). Real Redis and the database; the stream's part is played by the
same functions the worker calls."""

from __future__ import annotations

import re

from broadside.delivery.identities import service as identities
from broadside.delivery.lease import Lease
from broadside.delivery.streams import record_running, running_values
from tests.helpers import make_identity
from webapp.extensions import db


def page_text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def serving(app, redis_client, namespace, identity) -> None:
    """A worker holds the stream's lease and says what it runs on, as jobs.stream does."""
    Lease(redis_client, namespace, identity="box:123:abcdef", stream=identity.key).try_acquire()
    record_running(redis_client, namespace, identity.key, running_values(identity, app.config["SECRET_KEY"]))


def test_an_identity_saved_with_new_values_shows_the_running_ones_until_followed(
        app, logged_in_client, redis_client, namespace):
    row = make_identity("Product", "smtp://mail.product.example:25", delay_ms=300)
    before = identities.resolve(db.session, app.config, row.id)
    serving(app, redis_client, namespace, before)
    live = logged_in_client.get("/system/live").text
    assert f'id="applying-{row.id}"' not in live
    assert "300 ms" in page_text(live) and "smtp://mail.product.example:25" in live

    identities.update(db.session, row.id, identities.parse_input(
        {"name": "Product", "from": "Product <news@product.example>", "transport": "smtp://relay.example:2525",
         "delay_ms": 40, "hourly_limit": 900}, updating=True))
    text = page_text(logged_in_client.get("/system/live").text)
    assert "Saved changes: applying at the next tick" in text
    assert "Still running as “Product”, 300 ms, no cap, through smtp://mail.product.example:25" in text
    assert "saved: 40 ms, cap 900, through smtp://relay.example:2525" in text

    # The worker followed: its stream says the new values, and the note is gone.
    serving(app, redis_client, namespace, identities.resolve(db.session, app.config, row.id))
    text = page_text(logged_in_client.get("/system/live").text)
    assert "applying" not in text and "40 ms" in text and "of 900" in text


def test_a_changed_password_alone_is_told_apart(app, logged_in_client, redis_client, namespace):
    row = make_identity("Product", "smtp://mailer:old-password@mail.product.example:25", delay_ms=0)
    serving(app, redis_client, namespace, identities.resolve(db.session, app.config, row.id))
    identities.update(db.session, row.id, identities.parse_input(
        {"name": "Product", "from": "Product <news@product.example>",
         "transport": "smtp://mailer:new-password@mail.product.example:25", "delay_ms": 0}, updating=True))
    live = logged_in_client.get("/system/live").text
    assert "Saved secrets (of the transport or the webhook): applying at the next tick" in page_text(live)
    assert "old-password" not in live and "new-password" not in live
    assert "old-password" not in str(redis_client.keys(f"{namespace}*"))


def test_the_default_run_on_another_environment_says_restart(app, logged_in_client, redis_client, namespace):
    default = identities.default_identity(db.session, app.config)
    serving(app, redis_client, namespace, default)
    assert "restart it" not in page_text(logged_in_client.get("/system/live").text)
    app.config["SEND_DELAY_MS"] = 750  # the web process's environment, not the worker's
    text = page_text(logged_in_client.get("/system/live").text)
    assert f"{default.delay_ms} ms after each send" in text  # the pace in force is the worker's
    assert "The worker runs the default identity on another environment" in text
    assert "restart it with the same SMTP_URL" in text


def test_no_worker_shows_the_saved_values_and_nothing_applying(app, logged_in_client):
    make_identity("Product", "smtp://mail.product.example:25", delay_ms=300)
    text = page_text(logged_in_client.get("/system/live").text)
    assert "300 ms" in text and "no worker" in text and "applying" not in text
