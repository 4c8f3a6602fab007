"""An address whose local part is outside ASCII (it needs SMTPUTF8) arriving through the API:
the answer names the identities that cannot reach it, from their last connection check
(SMTP) or their provider's documentation; one never checked is "not checked yet"."""

from __future__ import annotations

from broadside.delivery.identities import service as identities
from tests.provider_servers import PostmarkServer
from tests.smtp_server import SmtpServer
from webapp.doctor.identities import check_identity
from webapp.doctor.smtp import check_smtp
from webapp.extensions import db


def _identity(name: str, url: str):
    return identities.create(db.session, identities.parse_input({
        "name": name, "from": "News <news@example.com>", "transport": url}))


def test_the_api_warns_which_identities_cannot_reach_a_utf8_address(app, client, api_headers,
                                                                     smtp_server):
    plain = SmtpServer(smtputf8=False).start()
    try:
        with PostmarkServer() as postmark:
            app.config["SMTP_URL"] = smtp_server.url  # offers SMTPUTF8
            check_smtp(app)
            _identity("Postmark", postmark.transport_url())
            old = _identity("Old relay", plain.url)
            _identity("Never checked", f"smtp://127.0.0.2:{plain.port}")
            db.session.commit()
            check_identity(app, identities.resolve(db.session, app.config, old.id))

            answer = client.post("/api/subscribers", headers=api_headers,
                                 json={"email": "Jürgen@Exämple.de", "lists": []})
            assert answer.status_code == 201
            assert answer.json["email"] == "jürgen@exämple.de"
            [warning] = answer.json["warnings"]
            assert warning.startswith("jürgen@exämple.de has characters outside ASCII")
            assert "Postmark (Postmark does not take it)" in warning
            assert "Old relay (its server did not offer SMTPUTF8 at its last check)" in warning
            assert "Never checked (not checked yet)" in warning
            assert identities.DEFAULT_NAME not in warning  # its server offered SMTPUTF8

            ascii_local = client.post("/api/subscribers", headers=api_headers,
                                      json={"email": "ann@exämple.de", "lists": []})
            assert ascii_local.json["warnings"] == []
    finally:
        plain.stop()


def test_an_import_warns_of_utf8_addresses_and_dedups_both_spellings_of_a_domain(
        app, client, logged_in_client, api_headers, screenshot_dir):
    from tests.webapp.test_api_audience import new_list, post_csv

    with PostmarkServer() as postmark:
        app.config["SMTP_URL"] = ""  # the outbox: it reaches everyone
        _identity("Postmark", postmark.transport_url())
        db.session.commit()
        weekly = new_list(client, api_headers)
        content = ("email\nJürgen@Exämple.de\nann@xn--exmple-cua.de\nAnn@EXÄMPLE.de\n"
                   "bob@example.com\n").encode()
        answer = post_csv(client, api_headers, weekly, content).json
        assert answer["imported"] == 3
        assert [r["reason"] for r in answer["rejected"]] == [
            "duplicate of line 3 (the same address)"]  # the A-label and the U-label meet
        [warning] = answer["warnings"]
        assert warning["line"] == 2 and "needs SMTPUTF8" in warning["message"]

        page = logged_in_client.get(f"/subscribers/imports/{answer['import_id']}")
        assert page.status_code == 200, page.status_code
        text = page.get_data(as_text=True)
        assert "1 imported address has characters outside ASCII" in text
        assert "These sending identities cannot reach it: Postmark (Postmark does not take it)" in text
