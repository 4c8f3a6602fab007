"""The public archive, its feed and the view-in-browser link:
public copies hold no reader's data and no unsubscribe link, unpublished or archive-off
answers 404, conditional GETs answer 304, the feed is valid Atom, and a reader's link shows
their own copy and cannot be changed into anyone else's."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET

import pytest
from itsdangerous import URLSafeSerializer
from sqlalchemy import select, update

from broadside.audience import lists as lists
from broadside.audience.subscribers import service as subscribers
from broadside.campaigns.archive import service as archive
from broadside.campaigns.archive.links import SALT, ViewTokens
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast, Delivery, MailingList, Subscriber, Subscription
from tests.helpers import csrf_token_from
from webapp.extensions import db, get_jobs

ATOM = "{http://www.w3.org/2005/Atom}"
SUBJECT = "Hello {{ name or 'friend' }}"
BODY = ("# The autumn issue\n\nHi {{ name }}, news from {{ attributes.city or 'your town' }}.\n\n"
        "Write to {{ email }} any time.")
# Distinctive values: none of them may appear on a public page.
READERS = [("zebediah.quux@example.org", "Zebediah Quuxley", "Xyloville"),
           ("ottoline.frell@example.org", "Ottoline Frell", "Wumpington")]
READER_WORDS = ("Zebediah", "Quuxley", "zebediah.quux", "Xyloville", "Ottoline", "Wumpington")


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Nothing here is specific to one database engine."""
    return request.param


def a_list(name: str, *, archive: bool, signup: bool = True, readers=READERS) -> MailingList:
    mailing_list = MailingList(name=name, signup_enabled=signup, archive_enabled=archive)
    db.session.add(mailing_list)
    db.session.flush()
    for email, person, city in readers:
        subscriber = Subscriber(email=email, name=person, attributes={"city": city})
        db.session.add(subscriber)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=subscriber.id, list_id=mailing_list.id,
                                    status="active"))
    db.session.commit()
    return mailing_list


def send(app, mailing_list: MailingList, subject: str = SUBJECT, body: str = BODY) -> int:
    draft = create_draft(db.session, list_id=mailing_list.id, subject=subject, body=body)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"],
                          jobs=get_jobs()).id


def post(client, path: str, data: dict, **options):
    """An owner's form POST, with the session's CSRF token (read once per client)."""
    if not hasattr(client, "csrf"):
        client.csrf = csrf_token_from(client.get("/lists/").text)
    return client.post(path, data={**data, "csrf_token": client.csrf}, **options)


def path_of(url: str) -> str:
    return url.split("localhost:5000", 1)[1]


def view_links(smtp_server) -> dict[str, str]:
    """Each recipient's view-in-browser path, from the plain-text part of their message."""
    links = {}
    for received in smtp_server.messages:
        text = received.message.get_body(("plain",)).get_content()
        found = re.search(r"View in your browser: (\S+)", text)
        if found:
            links[received.rcpt_tos[0]] = path_of(found.group(1))
    return links


def no_reader_in(html: str) -> None:
    for word in READER_WORDS:
        assert word not in html, word
    assert "/u/" not in html and "Unsubscribe" not in html and "unsubscribe" not in html


def test_the_archive_shows_published_issues_to_anyone_with_no_readers_data(
        app, logged_in_client, smtp_server, run_worker_burst):
    weekly = a_list("The Weekly Dispatch", archive=False)
    other = a_list("Other list", archive=True, readers=[])
    broadcast_id = send(app, weekly)
    run_worker_burst()
    visitor = app.test_client()
    index = f"/archive/{weekly.id}/"

    # Off by default, and nothing published: everything answers 404 alike.
    assert visitor.get(index).status_code == 404
    assert visitor.get(f"/archive/{weekly.id}/feed.atom").status_code == 404
    assert visitor.get(f"/archive/{weekly.id}/{broadcast_id}-hello-friend").status_code == 404
    # Published while the archive is off: still nothing public.
    page = post(logged_in_client, f"/archive/broadcasts/{broadcast_id}/publish", {"published": "1"},
                follow_redirects=True)
    assert "once the archive of “The Weekly Dispatch” is turned on" in page.text
    assert visitor.get(f"/archive/{weekly.id}/{broadcast_id}-hello-friend").status_code == 404
    post(logged_in_client, f"/archive/lists/{weekly.id}", {"enabled": "1"})

    listing = visitor.get(index)
    assert listing.status_code == 200
    assert "Hello friend" in listing.text and "1 issue" in listing.text
    assert f'href="/join/{weekly.id}"' in listing.text  # the sign-up form, which is on
    no_reader_in(listing.text)
    assert "Set-Cookie" not in listing.headers

    issue_path = f"/archive/{weekly.id}/{broadcast_id}-hello-friend"
    assert issue_path in listing.text
    issue = visitor.get(issue_path)
    assert issue.status_code == 200
    assert "Hi reader, news from your town." in issue.text and "The autumn issue" in issue.text
    no_reader_in(issue.text)
    assert "View in your browser" not in issue.text
    assert issue.headers["Cache-Control"] in ("public, max-age=300", "max-age=300, public")
    # Another slug goes to the issue's own address; another list's id finds nothing.
    moved = visitor.get(f"/archive/{weekly.id}/{broadcast_id}-old-title")
    assert moved.status_code == 301 and moved.location.endswith(issue_path)
    assert visitor.get(f"/archive/{other.id}/{broadcast_id}-hello-friend").status_code == 404

    # Conditional GETs: the ETag and Last-Modified each answer 304, with no body.
    for path in (index, issue_path, f"/archive/{weekly.id}/feed.atom"):
        first = visitor.get(path)
        assert first.headers["ETag"] and first.headers["Last-Modified"]
        again = visitor.get(path, headers={"If-None-Match": first.headers["ETag"]})
        assert again.status_code == 304 and again.data == b""
        since = visitor.get(path, headers={"If-Modified-Since": first.headers["Last-Modified"]})
        assert since.status_code == 304
        changed = visitor.get(path, headers={"If-None-Match": '"something-else"'})
        assert changed.status_code == 200

    # The feed: valid Atom, stable ids, absolute links that lead to the issue.
    feed = visitor.get(f"/archive/{weekly.id}/feed.atom")
    assert feed.mimetype == "application/atom+xml"
    no_reader_in(feed.text)
    root = ET.fromstring(feed.data)
    assert root.tag == f"{ATOM}feed"
    assert root.findtext(f"{ATOM}id") == f"tag:localhost,2026:broadside/archive/{weekly.id}"
    assert root.findtext(f"{ATOM}title") == "The Weekly Dispatch"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", root.findtext(f"{ATOM}updated") or "")
    assert root.find(f"{ATOM}author/{ATOM}name") is not None
    links = {link.get("rel"): link.get("href") for link in root.findall(f"{ATOM}link")}
    assert links["self"] == f"http://localhost:5000/archive/{weekly.id}/feed.atom"
    assert links["alternate"] == f"http://localhost:5000{index}"
    (entry,) = root.findall(f"{ATOM}entry")
    assert entry.findtext(f"{ATOM}id") == f"tag:localhost,2026:broadside/archive/{weekly.id}/{broadcast_id}"
    assert entry.findtext(f"{ATOM}title") == "Hello friend"
    for tag in ("updated", "published"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entry.findtext(f"{ATOM}{tag}") or "")
    alternate = entry.find(f"{ATOM}link")
    assert alternate is not None and alternate.get("rel") == "alternate"
    assert visitor.get(path_of(alternate.get("href") or "")).status_code == 200
    content = entry.find(f"{ATOM}content")
    assert content is not None and content.get("type") == "html"
    assert "<h1>The autumn issue</h1>" in (content.text or "")

    # Pages are kept rendered, but never past a change: renamed, sign-up closed.
    lists.update_list(db.session, weekly.id, name="The Renamed Dispatch", description="",
                      signup_enabled=False)
    renamed = visitor.get(index)
    assert "The Renamed Dispatch" in renamed.text and "/join/" not in renamed.text
    assert "The Renamed Dispatch" in visitor.get(issue_path).text

    # Taken out: gone from the index, the page and the feed; a different ETag.
    before = visitor.get(index).headers["ETag"]
    post(logged_in_client, f"/archive/broadcasts/{broadcast_id}/publish", {"published": "0"})
    assert visitor.get(issue_path).status_code == 404
    emptied = visitor.get(index)
    assert "Hello friend" not in emptied.text and emptied.headers["ETag"] != before
    assert ET.fromstring(visitor.get(f"/archive/{weekly.id}/feed.atom").data).find(f"{ATOM}entry") is None
    # Archive off: 404 again.
    post(logged_in_client, f"/archive/lists/{weekly.id}", {"enabled": "0"})
    assert visitor.get(index).status_code == 404


def test_a_draft_cannot_be_published(app, logged_in_client):
    weekly = a_list("Weekly", archive=True)
    draft = create_draft(db.session, list_id=weekly.id, subject="Soon", body="Not yet")
    page = post(logged_in_client, f"/archive/broadcasts/{draft.id}/publish", {"published": "1"},
                                 follow_redirects=True)
    assert "It can be published once it has been sent." in page.text
    assert app.test_client().get(f"/archive/{weekly.id}/{draft.id}-soon").status_code == 404
    assert post(logged_in_client, "/archive/broadcasts/999999/publish", {"published": "1"}).status_code == 404


def test_view_in_browser_shows_each_reader_their_own_copy_and_nobody_elses(
        app, smtp_server, run_worker_burst):
    weekly = a_list("Weekly", archive=True)
    send(app, weekly)
    run_worker_burst()
    links = view_links(smtp_server)
    assert set(links) == {email for email, _, _ in READERS}
    visitor = app.test_client()

    for email, person, city in READERS:
        html_part = next(m for m in smtp_server.messages if m.rcpt_tos[0] == email
                         ).message.get_body(("html",)).get_content()
        assert "View in your browser" in html_part and links[email] in html_part
        page = visitor.get(links[email])
        assert page.status_code == 200
        assert f"Hi {person}, news from {city}." in page.text and email in page.text
        assert "/u/" in page.text  # their own unsubscribe link is fine to show them
        assert "View in your browser" not in page.text
        for other_email, other, other_city in READERS:
            if other_email != email:
                assert other not in page.text and other_city not in page.text
        assert "script-src" not in page.headers["Content-Security-Policy"]
        assert "default-src 'none'" in page.headers["Content-Security-Policy"]
        assert page.headers["Referrer-Policy"] == "no-referrer"
        assert "no-store" in page.headers["Cache-Control"]

    # A changed character: refused with a page that says so, and shows nobody.
    token = links[READERS[0][0]].rsplit("/", 1)[1]
    # (Not the last character: base64's last one carries spare bits, so some changes to it
    # decode to the same signature.)
    flipped = token[:-10] + ("A" if token[-10] != "A" else "B") + token[-9:]
    for broken in (flipped, token[:20], "garbage"):
        refused = visitor.get(f"/view/{broken}")
        assert refused.status_code == 400
        assert "This link is not complete or has been changed" in refused.text
        no_reader_in(refused.text)

    # Another delivery's id in the payload breaks the signature...
    deliveries = dict(db.session.execute(select(Subscriber.email, Delivery.id).join(
        Delivery, Delivery.subscriber_id == Subscriber.id)).all())
    payload, signature = token.rsplit(".", 1)
    claimed = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claimed[0] == deliveries[READERS[0][0]]
    swapped = json.dumps([deliveries[READERS[1][0]], claimed[1]], separators=(",", ":"))
    forged = base64.urlsafe_b64encode(swapped.encode()).decode().rstrip("=") + "." + signature
    assert visitor.get(f"/view/{forged}").status_code == 400
    # ...and even signed with the real key, a mark made for one copy opens no other.
    signer = URLSafeSerializer(app.config["SECRET_KEY"], salt=SALT)
    resigned = signer.dumps([deliveries[READERS[1][0]], claimed[1]])
    other_copy = visitor.get(f"/view/{resigned}")
    assert other_copy.status_code == 404 and "Ottoline" not in other_copy.text
    assert ViewTokens(app.config["SECRET_KEY"]).read(resigned) is not None  # well-formed, still refused

    # An erased reader's copy is gone for good.
    erased_id = db.session.scalar(select(Subscriber.id).where(Subscriber.email == READERS[0][0]))
    with app.app_context():  # its own session, as the owner's request would have
        subscribers.erase(db.session, erased_id)
    gone = visitor.get(links[READERS[0][0]])
    assert gone.status_code == 404 and "no longer available" in gone.text
    no_reader_in(gone.text)


def test_the_link_is_in_the_email_when_on_and_not_when_off(
        app, logged_in_client, smtp_server, run_worker_burst):
    archive_on = a_list("Archive on", archive=True, readers=[("on@a.example", "A", "")])
    archive_off = a_list("Archive off", archive=False, readers=[("off@b.example", "B", "")])
    chosen_on = a_list("Chosen on", archive=False, readers=[("chosen@c.example", "C", "")])
    chosen_off = a_list("Chosen off", archive=True, readers=[("refused@d.example", "D", "")])
    for mailing_list, choice in ((chosen_on, "on"), (chosen_off, "off")):
        draft = create_draft(db.session, list_id=mailing_list.id, subject="Hi", body="Body")
        answer = post(logged_in_client, f"/archive/broadcasts/{draft.id}/view-link",
                      {"view_link": choice, "back": "send"})
        assert answer.status_code == 302 and f"/broadcasts/{draft.id}/send" in answer.location
        send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    for mailing_list in (archive_on, archive_off):
        send(app, mailing_list, subject="Hi", body="Body")
    refused = post(logged_in_client, f"/archive/broadcasts/{draft.id}/view-link",
                   {"view_link": "sometimes"}, follow_redirects=True)
    assert "Choose whether the email carries" in refused.text
    run_worker_burst()

    assert len(smtp_server.messages) == 4
    for received in smtp_server.messages:
        message = received.message
        html_part = message.get_body(("html",)).get_content()
        text_part = message.get_body(("plain",)).get_content()
        wanted = received.rcpt_tos[0] in ("on@a.example", "chosen@c.example")
        assert ("View in your browser" in html_part) is wanted, received.rcpt_tos
        assert ("View in your browser" in text_part) is wanted, received.rcpt_tos
        assert ("/view/" in html_part) is wanted and ("/view/" in text_part) is wanted


def test_the_feed_stays_valid_xml_whatever_the_body_holds(app):
    weekly = a_list("Weekly & <Friends>", archive=True, readers=[])
    draft = create_draft(db.session, list_id=weekly.id, subject="Bells & <tags>",
                         body="A bell\x07, a form feed\x0c and ]]> <b>not bold</b> & more")
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=None)
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id).values(status="sent"))
    db.session.commit()
    archive.publish(db.session, draft.id, True)
    feed = app.test_client().get(f"/archive/{weekly.id}/feed.atom")
    root = ET.fromstring(feed.data)  # raises on anything XML forbids
    assert root.findtext(f"{ATOM}title") == "Weekly & <Friends>"
    (entry,) = root.findall(f"{ATOM}entry")
    assert entry.findtext(f"{ATOM}title") == "Bells & <tags>"
    content = entry.findtext(f"{ATOM}content") or ""
    assert "&lt;b&gt;not bold&lt;/b&gt;" in content and "]]&gt;" in content
