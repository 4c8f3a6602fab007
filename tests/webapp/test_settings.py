"""Settings: sender identity, postal address and time zone; the pace in force, read-only."""

from __future__ import annotations

import pytest

from broadside.campaigns.broadcasts.service import sender_identity
from broadside.core.errors import ValidationError
from broadside.core.site_settings import SettingsError, get_settings, update_settings
from tests.helpers import csrf_token_from
from webapp.extensions import db


def post_sender(client, **fields):
    page = client.get("/settings/")
    data = {"sender_name": "", "sender_email": "", "postal_address": "", "time_zone": "UTC",
            "csrf_token": csrf_token_from(page.text), **fields}
    return client.post("/settings/sender", data=data)


def test_settings_page_has_labelled_sender_fields_and_the_pace_in_force(logged_in_client):
    page = logged_in_client.get("/settings/")
    assert page.status_code == 200
    for field_id, label in (("sender_name", "Sender name"), ("sender_email", "Sender address"),
                            ("postal_address", "Postal address"), ("time_zone", "Time zone")):
        assert f'<label for="{field_id}">{label}</label>' in page.text
    assert '<optgroup label="Europe">' in page.text
    assert '<option selected value="UTC">UTC</option>' in page.text
    # The tests run with SEND_DELAY_MS=0 and no hourly limit.
    assert "<strong>0 ms</strong>" in page.text and "<strong>No limit</strong>" in page.text
    assert "SEND_DELAY_MS" in page.text and "SEND_HOURLY_LIMIT" in page.text
    assert "API tokens" in page.text


def test_pace_shows_the_configured_delay_and_hourly_limit(request, app_config):
    app_config.update(SEND_DELAY_MS="250", SEND_HOURLY_LIMIT="3000")
    client = request.getfixturevalue("logged_in_client")
    page = client.get("/settings/")
    assert "<strong>250 ms</strong>" in page.text
    assert "about 4 emails a second, 14,400 an hour" in page.text
    assert "<strong>3,000 emails an hour</strong>" in page.text


def test_saving_sender_settings_stores_clean_values(logged_in_client):
    response = post_sender(logged_in_client, sender_name="  Acme   Weekly ",
                           sender_email=" News@Acme.Example ",
                           postal_address=" Acme Ltd \r\n 1 Main Street\r\n\r\n",
                           time_zone="Europe/Paris")
    assert response.status_code == 303
    assert response.headers["Location"].endswith("/settings/#sender")
    settings = get_settings(db.session)
    db.session.refresh(settings)
    assert (settings.sender_name, settings.sender_email, settings.postal_address,
            settings.time_zone) == ("Acme Weekly", "news@acme.example",
                                    "Acme Ltd\n1 Main Street", "Europe/Paris")
    page = logged_in_client.get("/settings/")
    assert "Settings saved." in page.text
    assert '<option selected value="Europe/Paris">' in page.text
    assert sender_identity(db.session, "Default <d@example.com>") == (
        "Acme Weekly", "news@acme.example")


@pytest.mark.parametrize(("fields", "message"), [
    ({"sender_email": "not-an-email"}, "is not a valid email address"),
    ({"time_zone": "Mars/Olympus_Mons"}, "is not a time zone we know"),
    ({"sender_name": "Bank <security@bank.example>"}, "may not contain"),
    ({"postal_address": "x" * 1001}, "postal address is too long"),
])
def test_bad_settings_are_refused_and_nothing_changes(logged_in_client, fields, message):
    update_settings(db.session, sender_name="Before", sender_email="before@example.com",
                    postal_address="Old address", time_zone="UTC")
    good = {"sender_name": "After", "sender_email": "after@example.com",
            "postal_address": "New address"}
    response = post_sender(logged_in_client, **{**good, **fields})
    assert response.status_code == 422
    assert message in response.text
    assert 'aria-invalid="true"' in response.text  # the error sits on its field
    settings = get_settings(db.session)
    db.session.refresh(settings)
    assert (settings.sender_name, settings.sender_email, settings.postal_address) == (
        "Before", "before@example.com", "Old address")


def test_empty_sender_address_falls_back_to_mail_from(app):
    update_settings(db.session, sender_name="", sender_email="", postal_address="",
                    time_zone="UTC")
    assert sender_identity(db.session, "Broadside <newsletter@example.com>") == (
        "Broadside", "newsletter@example.com")


def test_settings_errors_name_their_field_and_are_validation_errors(app):
    with pytest.raises(SettingsError) as caught:
        update_settings(db.session, sender_name="ok", sender_email="a@", postal_address="",
                        time_zone="UTC")
    assert caught.value.field == "sender_email" and isinstance(caught.value, ValidationError)


def test_postal_address_is_shown_as_text(logged_in_client):
    post_sender(logged_in_client, postal_address="<script>alert(1)</script>")
    page = logged_in_client.get("/settings/")
    assert "<script>alert(1)" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
