"""Reader analytics, privacy first: through the real worker and aiosmtpd, then the public pixel
and click routes through the test client, then the tables themselves.

SQLite only (the module's `backend`), except the day's upsert, whose SQL differs between the
engines (`test_a_days_counts_are_one_row_on_both_engines`)."""

from __future__ import annotations

import re
from html import unescape

import pytest
from sqlalchemy import func, insert, inspect, select, text, update

from broadside.campaigns.analytics import modes
from broadside.campaigns.analytics.counting import record_open
from broadside.campaigns.analytics.tokens import OpenClaim, TrackingTokens
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import (
    Broadcast,
    Delivery,
    MailingList,
    PersonActivity,
    Subscriber,
    TrackedLink,
    TrackingDay,
)
from broadside.mail.unsubscribe_tokens import Tokens
from tests.helpers import csrf_token_from, make_list, while_the_server_takes
from webapp.extensions import db, get_jobs

BODY = ("Hi {{ name }}. Read [the notes](https://acme.example/notes?a=1&b=2), "
        "[your page](https://acme.example/people/{{ email }}), "
        "[the shop](https://shop.example/) or [write](mailto:hello@acme.example).")
READER = {"User-Agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15"}
READER_ADDRESS = "203.0.113.7"  # TEST-NET-3 (+ n): must never land in a table or a log line
HREF = re.compile(r'href="([^"]*)"')
PIXEL = re.compile(r'<img src="([^"]*/t/o/[^"]*)"')


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    return request.param


def send(app, mailing_list: MailingList, tracking: str | None, body: str = BODY) -> Broadcast:
    draft = create_draft(db.session, list_id=mailing_list.id, subject="News for {{ name }}", body=body)
    if tracking is not None:
        modes.choose(db.session, draft.id, tracking)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())


def html_of(received) -> str:
    return received.message.get_body(("html",)).get_content()


def text_of(received) -> str:
    return received.message.get_body(("plain",)).get_content()


def later(app, url: str, seconds: int = 3600) -> str:
    """The same token as a reader would hit it `seconds` after delivery (tokens carry their
    send's 10-second slot; the test moves it back rather than waiting)."""
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    path = url.split("://", 1)[1].split("/", 1)[1]
    if "/t/o/" in url:
        claim = tokens.read_open(path.rsplit("/", 1)[1].removesuffix(".gif"))
        return "/t/o/" + tokens.open_token(claim.broadcast_id, claim.slot - seconds // 10,
                                           claim.delivery_id) + ".gif"
    claim = tokens.read_click(path.rsplit("/", 1)[1])
    return "/t/c/" + tokens.click_token(claim.broadcast_id, claim.position, claim.url,
                                        claim.slot - seconds // 10, claim.delivery_id)


def every_row_as_text() -> str:
    """Every value of every table, for a search for what must not be there."""
    db.session.commit()
    names = inspect(db.engine).get_table_names()
    rows = []
    for name in names:
        rows.extend(repr(tuple(row)) for row in db.session.execute(text(f'SELECT * FROM "{name}"')))
    return "\n".join(rows)


def table_counts() -> dict[str, int]:
    db.session.commit()
    return {name: db.session.scalar(text(f'SELECT COUNT(*) FROM "{name}"'))
            for name in inspect(db.engine).get_table_names()}


def test_tracking_off_sends_no_pixel_and_no_rewritten_link(app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 3)
    assert modes.default_mode(db.session) == "off"  # privacy first: nobody chose anything
    broadcast = send(app, weekly, tracking=None)
    run_worker_burst()
    assert db.session.get(Broadcast, broadcast.id).tracking == "off"  # frozen at Send
    assert len(smtp_server.messages) == 3
    for received in smtp_server.messages:
        html, plain = html_of(received), text_of(received)
        assert "/t/o/" not in html and "/t/c/" not in html and "/t/" not in plain
        assert not PIXEL.search(html)
        hrefs = [unescape(h) for h in HREF.findall(html)]
        assert "https://acme.example/notes?a=1&b=2" in hrefs
        assert "https://shop.example/" in hrefs
    assert db.session.scalar(select(func.count()).select_from(TrackedLink)) == 0


def test_aggregate_counts_opens_and_clicks_and_no_table_holds_the_person(
        app, client, smtp_server, run_worker_burst, caplog, redis_client, namespace):
    weekly = make_list(db.session, 3)
    broadcast = send(app, weekly, tracking="aggregate")
    run_worker_burst()
    received = smtp_server.messages
    assert len(received) == 3
    before = table_counts()
    for n, message in enumerate(received):
        html, plain = html_of(message), text_of(message)
        pixel = unescape(PIXEL.search(html).group(1))
        links = [unescape(h) for h in HREF.findall(html)]
        tracked = [h for h in links if "/t/c/" in h]
        # notes and the shop; not their own page (its address names them), not mailto, not
        # unsubscribe (test_tracking_names_nobody.py has the page with a merge field)
        assert len(tracked) == 2
        assert "mailto:hello@acme.example" in links
        assert f"https://acme.example/people/{message.rcpt_tos[0]}" in links
        assert any("/u/" in h for h in links), "the unsubscribe link is left as it is"
        assert plain.count("/t/c/") == 2, plain  # the plain-text part's links too
        # Nothing in the aggregate tokens names the person.
        delivery = db.session.scalar(select(Delivery.id).where(
            Delivery.broadcast_id == broadcast.id, Delivery.subscriber_id == Subscriber.id,
            Subscriber.email == message.rcpt_tos[0]))
        tokens = TrackingTokens(app.config["SECRET_KEY"])
        assert tokens.read_open(pixel.rsplit("/", 1)[1][:-4]).delivery_id is None
        claim = tokens.read_click(tracked[1].rsplit("/", 1)[1])
        assert claim.delivery_id is None and claim.position == 2
        assert claim.url == "https://shop.example/"
        # broadcast, position, address, send slot: nothing more (a per-person one adds the delivery)
        assert len(tokens.clicks.loads(tracked[0].rsplit("/", 1)[1])) == 4
        assert delivery is not None
        # A reader opens it an hour later, the first again once ten minutes have passed (their
        # Redis key gone, as its TTL makes it go), and follows both links.
        env = {"REMOTE_ADDR": f"{READER_ADDRESS}{n}"}  # three readers, three addresses
        for again in ((False, True) if n == 0 else (False,)):
            if again:
                redis_client.delete(*redis_client.scan_iter(f"{namespace}:analytics:seen:*"))
            answer = client.get(later(app, pixel), headers=READER, environ_base=env)
            assert answer.status_code == 200 and answer.mimetype == "image/gif"
            assert "no-store" in answer.headers["Cache-Control"]
        first = client.get(later(app, tracked[0]), headers=READER, environ_base=env)
        assert first.status_code == 302 and first.location == "https://acme.example/notes?a=1&b=2"
        shop = client.get(later(app, tracked[1], seconds=7200), headers=READER, environ_base=env)
        assert shop.location == "https://shop.example/"

    days = db.session.scalars(select(TrackingDay).where(TrackingDay.broadcast_id == broadcast.id)).all()
    assert [(d.day, d.opens, d.clicks, d.bot_opens, d.bot_clicks) for d in days] == [(0, 4, 6, 0, 0)]
    links = db.session.scalars(select(TrackedLink).where(TrackedLink.broadcast_id == broadcast.id)
                               .order_by(TrackedLink.position)).all()
    assert [(link.url, link.clicks) for link in links] == [
        ("https://acme.example/notes?a=1&b=2", 3), ("https://shop.example/", 3)]
    # One row per day and per link, however many hits: ten hits added one row (the day's; the
    # links' rows were written at Send), and those tables have no column for a person.
    after = table_counts()
    assert {name: after[name] - before[name] for name in after if after[name] != before[name]} == {
        "analytics_days": 1}
    assert db.session.scalar(select(func.count()).select_from(PersonActivity)) == 0
    for table in ("analytics_days", "analytics_links"):
        columns = {c["name"] for c in inspect(db.engine).get_columns(table)}
        assert not columns & {"subscriber_id", "delivery_id", "email", "address", "ip"}, columns
    everything = every_row_as_text()
    assert READER_ADDRESS not in everything
    for message in received:  # their addresses appear only where they did before (subscribers)
        assert everything.count(message.rcpt_tos[0]) == 1
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert READER_ADDRESS not in logged


def test_a_tampered_or_unknown_click_token_is_a_404_and_a_good_one_goes_exactly_there(
        app, client, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 1)
    broadcast = send(app, weekly, tracking="aggregate")
    run_worker_burst()
    html = html_of(smtp_server.messages[0])
    good = [unescape(h) for h in HREF.findall(html) if "/t/c/" in h][0]
    token = good.rsplit("/", 1)[1]
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    claim = tokens.read_click(token)
    forged = TrackingTokens("another-secret-key-" * 3)
    for bad in (
        # One character of the signed part changed (the signature's last character can
        # differ in padding bits alone, which decode to the same bytes: a valid token).
        token[:5] + ("A" if token[5] != "A" else "B") + token[6:],
        token[: len(token) // 2],  # cut
        forged.click_token(broadcast.id, 0, "https://evil.example/", claim.slot),  # not our key
        # Signed, but the broadcast has no such link, or there is no such broadcast.
        tokens.click_token(broadcast.id, 7, "https://evil.example/", claim.slot),
        tokens.click_token(broadcast.id + 50, 0, "https://evil.example/", claim.slot),
        # Our own open token is not a click token (each kind has its salt).
        tokens.open_token(broadcast.id, claim.slot),
    ):
        answer = client.get("/t/c/" + bad, headers=READER)
        assert answer.status_code == 404, bad
        assert "evil.example" not in answer.headers.get("Location", "")
    assert client.get("/t/o/not-a-token.gif").status_code == 404
    answer = client.get(later(app, good), headers=READER)
    assert answer.status_code == 302 and answer.location == "https://acme.example/notes?a=1&b=2"
    assert db.session.scalar(select(func.sum(TrackedLink.clicks + TrackedLink.bot_clicks))) == 1


def test_machines_are_counted_apart_from_readers(app, client, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 1)
    # Three links counts only tracks (one with a merge field would be left as it is).
    broadcast = send(app, weekly, tracking="aggregate", body=BODY.replace("{{ email }}", "you"))
    run_worker_burst()
    html = html_of(smtp_server.messages[0])
    pixel = unescape(PIXEL.search(html).group(1))
    links = [unescape(h) for h in HREF.findall(html) if "/t/c/" in h]
    # Apple Mail Privacy Protection: its proxy loads the image from Apple's network.
    client.get(later(app, pixel), headers=READER, environ_base={"REMOTE_ADDR": "17.58.1.9"})
    # A fetch within seconds of delivery (the token as sent, hit at once).
    client.get(pixel, headers=READER)
    # A scanner's user agent; and no user agent at all.
    client.get(later(app, pixel), headers={"User-Agent": "Barracuda Sentinel (EE)"})
    client.get(later(app, pixel), headers={"User-Agent": ""})
    client.get(later(app, pixel), headers=READER)  # the one reader
    # A prefetch: one client follows every link of the message within a second.
    env = {"REMOTE_ADDR": "198.51.100.4"}
    hits = [client.get(later(app, link), headers=READER, environ_base=env) for link in links]
    assert all(hit.status_code == 302 for hit in hits)
    # Later, a reader clicks the shop (another client).
    client.get(later(app, links[2], seconds=4000), headers=READER,
               environ_base={"REMOTE_ADDR": "198.51.100.5"})
    day = db.session.scalar(select(TrackingDay).where(TrackingDay.broadcast_id == broadcast.id))
    assert (day.opens, day.bot_opens) == (1, 4)
    assert (day.clicks, day.bot_clicks) == (1, 3)
    by_link = db.session.execute(select(TrackedLink.position, TrackedLink.clicks, TrackedLink.bot_clicks)
                                 .order_by(TrackedLink.position)).all()
    assert [tuple(row) for row in by_link] == [(0, 0, 1), (1, 0, 1), (2, 1, 1)]


def test_per_person_needs_the_lists_switch_and_its_public_pages_say_so(
        app, client, logged_in_client, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 2)
    weekly.signup_enabled = True
    db.session.commit()
    draft = create_draft(db.session, list_id=weekly.id, subject="Per person", body=BODY)
    # Refused while the list has not been switched on: the send page answers 422, choice kept.
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    token = csrf_token_from(page.text)
    refused = logged_in_client.post(f"/broadcasts/{draft.id}/tracking",
                                    data={"csrf_token": token, "tracking": "per_person"})
    assert refused.status_code == 422
    assert "Per-person tracking is off for the list" in refused.text
    assert re.search(r'value="per_person" checked', refused.text)
    assert db.session.get(Broadcast, draft.id).tracking is None
    join = client.get(f"/join/{weekly.id}")
    assert join.status_code == 200 and "tracking-notice" not in join.text

    lists_page = logged_in_client.get(f"/lists/{weekly.id}")
    assert "may record, under your name" not in unescape(lists_page.text)
    answer = logged_in_client.post(f"/lists/{weekly.id}/tracking", data={
        "csrf_token": csrf_token_from(lists_page.text), "per_person": "on"})
    assert answer.status_code == 302
    join = client.get(f"/join/{weekly.id}")
    assert "may record, under your name, whether you opened them" in join.text
    # The form the owner pastes on their own site says it too (it is shown escaped).
    snippet = re.search(r'<code id="signup-snippet">(.*?)</code>',
                        logged_in_client.get(f"/lists/{weekly.id}").text, re.S).group(1)
    assert "may record, under your name, whether you opened them" in unescape(snippet)
    person = db.session.scalar(select(Subscriber).order_by(Subscriber.id))
    unsubscribe_token = Tokens(app.config["SECRET_KEY"]).make(person.id, weekly.id, None, person.created_at)
    preferences = client.get(f"/u/{unsubscribe_token}/preferences")
    assert preferences.status_code == 200, preferences.status_code
    assert "may record, under your name" in preferences.text and "Weekly" in preferences.text

    chosen = logged_in_client.post(f"/broadcasts/{draft.id}/tracking",
                                   data={"csrf_token": token, "tracking": "per_person"})
    assert chosen.status_code == 302
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker_burst()
    tokens = TrackingTokens(app.config["SECRET_KEY"])
    for message in smtp_server.messages:
        html = html_of(message)
        pixel = unescape(PIXEL.search(html).group(1))
        delivery = db.session.scalar(select(Delivery.id)
                                     .join(Subscriber, Subscriber.id == Delivery.subscriber_id)
                                     .where(Subscriber.email == message.rcpt_tos[0]))
        assert tokens.read_open(pixel.rsplit("/", 1)[1][:-4]).delivery_id == delivery
        client.get(later(app, pixel), headers=READER)
        client.get(later(app, pixel, seconds=5000), headers=READER)  # again: first time kept
    link = [unescape(h) for h in HREF.findall(html_of(smtp_server.messages[0])) if "/t/c/" in h][0]
    client.get(later(app, link), headers=READER)
    rows = db.session.execute(select(PersonActivity.kind, func.count()).group_by(PersonActivity.kind)).all()
    assert dict(rows) == {"open": 2, "click": 1}
    show = logged_in_client.get(f"/broadcasts/{draft.id}")
    who = show.text.split('id="analytics-people"', 1)[1].split("</table>", 1)[0]
    assert smtp_server.messages[0].rcpt_tos[0] in who and smtp_server.messages[1].rcpt_tos[0] in who
    assert re.search(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d</td>", who), who  # the first open, shown
    # The list switched off again: hits of copies already out are counted, but by nobody.
    modes.set_list_per_person(db.session, weekly.id, False)
    client.get(later(app, [unescape(h) for h in HREF.findall(html_of(smtp_server.messages[1]))
                           if "/t/c/" in h][0]), headers=READER)
    assert db.session.scalar(select(func.count()).select_from(PersonActivity)
                             .where(PersonActivity.kind == "click")) == 1


def test_turning_tracking_off_mid_send_stops_it_for_the_copies_not_yet_sent(
        app, smtp_server, run_worker_burst):
    weekly = make_list(db.session, 5)
    broadcast = send(app, weekly, tracking="aggregate")
    # The owner presses "Turn tracking off" while the second copy is on the wire.
    while_the_server_takes(smtp_server, "reader00001@example.com",
                           update(Broadcast).where(Broadcast.id == broadcast.id).values(tracking="off"))
    run_worker_burst()
    by_address = {m.rcpt_tos[0]: html_of(m) for m in smtp_server.messages}
    assert len(by_address) == 5
    tracked = sorted(a for a, html in by_address.items() if "/t/c/" in html or "/t/o/" in html)
    # At full speed the third person's envelope rides behind the second copy's body, so their
    # copy was built before it went out, and the worker builds the fourth's while the server
    # takes the second (jobs/riding.py): either may have been built a moment
    # before the switch. Every copy built after it goes out untracked.
    assert tracked[:2] == ["reader00000@example.com", "reader00001@example.com"]
    assert tracked in (tracked[:2], [*tracked[:2], "reader00002@example.com"],
                       [*tracked[:2], "reader00002@example.com", "reader00003@example.com"])
    for address, html in by_address.items():
        if address not in tracked:
            assert not PIXEL.search(html)
            assert "https://acme.example/notes?a=1&amp;b=2" in html


def test_the_owner_stops_tracking_and_nothing_more_is_counted(app, client, logged_in_client, smtp_server,
                                                              run_worker_burst):
    weekly = make_list(db.session, 1)
    broadcast = send(app, weekly, tracking="aggregate")
    run_worker_burst()
    html = html_of(smtp_server.messages[0])
    link = [unescape(h) for h in HREF.findall(html) if "/t/c/" in h][0]
    show = logged_in_client.get(f"/broadcasts/{broadcast.id}")
    assert "Opens are an estimate" in show.text and 'id="analytics-links"' in show.text
    answer = logged_in_client.post(f"/broadcasts/{broadcast.id}/tracking/stop",
                                   data={"csrf_token": csrf_token_from(show.text)})
    assert answer.status_code == 302
    assert db.session.get(Broadcast, broadcast.id).tracking == "off"
    # The reader's link still works; nothing is counted.
    hit = client.get(later(app, link), headers=READER)
    assert hit.status_code == 302 and hit.location == "https://acme.example/notes?a=1&b=2"
    assert db.session.scalar(select(func.sum(TrackedLink.clicks + TrackedLink.bot_clicks))) == 0
    # A sent broadcast's tracking cannot be turned back on.
    again = logged_in_client.post(f"/broadcasts/{broadcast.id}/tracking",
                                  data={"csrf_token": csrf_token_from(show.text), "tracking": "aggregate"})
    assert again.status_code == 302
    assert db.session.get(Broadcast, broadcast.id).tracking == "off"


def test_the_settings_default_is_saved_and_a_bad_value_is_a_422(app, logged_in_client):
    page = logged_in_client.get("/settings/")
    assert 'id="tracking-settings-heading"' in page.text
    token = csrf_token_from(page.text)
    bad = logged_in_client.post("/settings/tracking", data={"csrf_token": token, "tracking": "everything"})
    assert bad.status_code == 422 and "Choose the tracking" in bad.text
    assert modes.default_mode(db.session) == "off"
    good = logged_in_client.post("/settings/tracking", data={"csrf_token": token, "tracking": "aggregate"})
    assert good.status_code == 302
    weekly = make_list(db.session, 0)
    draft = create_draft(db.session, list_id=weekly.id, subject="S", body="B")
    send_page = logged_in_client.get(f"/broadcasts/{draft.id}/send")
    assert re.search(r'value="aggregate" checked', send_page.text)
    assert "your default in" in send_page.text


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_days_counts_are_one_row_on_both_engines(app, backend):
    weekly = make_list(db.session, 0)
    draft = create_draft(db.session, list_id=weekly.id, subject="S", body="B")
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id)
                       .values(tracking="aggregate", status="sent"))
    db.session.commit()
    for n in range(5):
        assert record_open(db.session, OpenClaim(draft.id, 0), bot=n == 4)
    rows = db.session.execute(select(TrackingDay.day, TrackingDay.opens, TrackingDay.bot_opens)).all()
    assert [tuple(r) for r in rows] == [(0, 4, 1)]
    db.session.execute(insert(TrackingDay).values(broadcast_id=draft.id, day=3, opens=0, bot_opens=0,
                                                  clicks=0, bot_clicks=0))
    db.session.commit()
    assert record_open(db.session, OpenClaim(draft.id, 0), bot=False)
    assert db.session.scalar(select(func.count()).select_from(TrackingDay)) == 2


def test_the_access_log_keeps_no_readers_address_for_the_tracking_routes():
    from datetime import timedelta
    from types import SimpleNamespace

    from gunicorn.config import Config

    from webapp.logs import GunicornLogger

    config = Config()
    config.set("accesslog", "-")
    logger = GunicornLogger(config)
    lines = {}
    for path in ("/t/c/abc.def", "/t/o/abc.def.gif", "/healthz"):
        request = SimpleNamespace(headers=[("X-FORWARDED-FOR", READER_ADDRESS)], method="GET", path=path,
                                  query="", uri=path, version=(1, 1))
        response = SimpleNamespace(status="200 OK", headers=[], response_length=0, sent=0)
        environ = {"REMOTE_ADDR": READER_ADDRESS, "REQUEST_METHOD": "GET", "RAW_URI": path,
                   "PATH_INFO": path, "QUERY_STRING": "", "SERVER_PROTOCOL": "HTTP/1.1"}
        atoms = logger.atoms(response, request, environ, timedelta(seconds=0.01))
        lines[path] = config.access_log_format % atoms + " " + " ".join(map(str, atoms.values()))
    assert READER_ADDRESS not in lines["/t/c/abc.def"] and READER_ADDRESS not in lines["/t/o/abc.def.gif"]
    assert READER_ADDRESS in lines["/healthz"]  # other routes log as before
