"""Every page, once, in one Chromium context: nothing scrolls sideways on a 390 px phone, no text
leaves its box, no table is wider than its card (a wide owner table is one labelled block per
row on a phone), every page has a favicon, the public pages take the design's font, and axe-core
(WCAG 2.1 AA) finds nothing serious or critical at 1280 px and at 390 px.

The pages come from the app's url_map: every GET route is either walked here (`PAGES`) or left
out with a reason (`NOT_PAGES`), so a new page cannot be forgotten; adding one is one line. The
seeded data is deliberately long (addresses, names, subjects, outbox file names) so that
overflow shows. The walk is cheap: one login, SQLite, one browser context, axe injected once
per page (tests/browser/vendor/README.md says which axe-core and where it came from).
"""

from __future__ import annotations

import io
import os
import re
import signal
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

import pytest
from flask import Flask, url_for
from playwright.sync_api import Page, expect
from sqlalchemy import select

from broadside.audience import lists as lists
from broadside.audience import signup as signup
from broadside.audience.subscribers import bulk
from broadside.audience.subscribers.search import Filters
from broadside.audience.transfer.importer import import_dir, import_path, process, receive_upload
from broadside.audience.unsubscribe.suppression import record_bounce, suppress
from broadside.campaigns.archive import service as archive
from broadside.campaigns.archive.links import ViewTokens
from broadside.campaigns.automations import entering
from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.campaigns.content import blocks as content_blocks
from broadside.campaigns.content import templates as message_templates
from broadside.campaigns.transactional import templates as transactional
from broadside.core import accounts
from broadside.core.models import (
    Broadcast,
    Delivery,
    Owner,
    Subscriber,
    Subscription,
    TransactionalMessage,
    WebhookEndpoint,
    WebhookMessage,
)
from broadside.core.models.automations import AutomationStep
from broadside.core.site_settings import update_settings
from broadside.core.timeutil import utcnow
from broadside.delivery.content_retention import remove_due
from broadside.delivery.identities import service as identities
from broadside.mail import design
from broadside.mail import media as media_library
from broadside.mail.design import FONTS
from broadside.mail.password_reset import ResetLinks
from broadside.segments import service as segments
from broadside.webhooks import EVENT_TYPES
from jobs.app import from_flask
from jobs.worker import run_worker
from tests.browser.steps import sign_in, table_problems
from tests.design_images import png
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, make_token
from webapp.extensions import db, get_jobs

pytestmark = pytest.mark.browser

PHONE, DESKTOP = 390, 1280
# Pages photographed at both widths on every run (BROADSIDE_SCREENSHOTS=all: every page).
SCREENSHOTS = {"unsubscribe: confirm", "unsubscribe: preferences", "deliveries", "subscriber", "list",
               "archive", "archive issue", "view in browser", "sign-up form", "dashboard", "broadcasts",
               "lists", "departures", "subscribers", "settings", "webhook endpoint", "system",
               "deliverability", "templates", "blocks", "block", "edit template", "broadcast editor",
               "media", "delete an image"}
AXE_SOURCE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text()

LONG_DOMAIN = "correspondence.remarkably-long-company-name.example.com"
LONG_EMAIL = f"maximiliana.featherstonehaugh-worthington@{LONG_DOMAIN}"
LONG_TOWN = "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch"
LONG_NAME = "Maximiliana Alexandrovna Featherstonehaugh-Worthington-Cholmondeley"
LONG_LIST = "The Remarkably Thorough Weekly Dispatch of Everything Worth Knowing at Acme"
LONG_SUBJECT = ("{{ name }}, here is everything that happened at Acme in November: exports, "
                "dark mode and https://acme.example.com/changelog/2026/november-release-notes")


# The owner's wide tables, by page: one block per row on a phone, each cell with its label.
STACKED = {
    "broadcasts": ["#broadcast-table"], "lists": ["#lists"], "list": [".departures"],
    "departures": [".departures"], "subscribers": ["#subscriber-table"],
    "system": ["#stream-table", "#error-table", "#outbox-table"],
    "subscriber": ["#subscriber-lists", "#subscriber-broadcasts", "#subscriber-automations", ".departures",
                   "#subscriber-one-off"],
    "settings": ["#token-table"], "webhook endpoint": ["#webhook-log"], "dashboard": [".recent-table"],
    "security": ["#session-table"],
    "transactional templates": ["#template-table", "#recent-sends"],
    "transactional template": ["#template-sends"],
}
# The public pages that show the owner's brand take the design's font (Settings → Design); not
# these, which are Broadside's own (the owner's way in), or the email itself (its font is
# inline, as in the inbox).
UNBRANDED = {"sign in", "error 404 (visitor)", "forgot password", "forgot password: check your inbox",
             "new password", "new password: broken link", "new password: expired link", "view in browser"}
SEED_FONT = "serif"


class Seed(dict):
    """Ids and tokens of the seeded data, by name (a visit's route arguments name them)."""


Step = Callable[[Page, Seed], None]


class Visit(NamedTuple):
    label: str
    endpoint: str | None  # None: a URL that no route answers
    args: dict[str, str] = {}  # route argument -> a name in the Seed (or the value itself)
    then: Step | None = None  # a form to submit first: the page it leads to is the one checked
    status: int = 200


# ---------------------------------------------------------------- steps that reach a page by a form

def sign_up(page: Page, seed: Seed) -> None:
    page.get_by_label("Email").fill("new." + LONG_EMAIL)
    page.get_by_label("Name (optional)").fill(LONG_NAME)
    page.get_by_role("button", name="Subscribe").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    person = db.session.scalar(select(Subscriber.id).where(Subscriber.email == "new." + LONG_EMAIL))
    sent_at = db.session.scalar(select(Subscription.confirmation_sent_at)
                                .where(Subscription.subscriber_id == person))
    db.session.commit()
    links = signup.Links(seed["secret_key"], seed["base_url"])
    seed["signup_token"] = signup.make_token(links, person, seed["weekly"], sent_at)


def ask_for_reset_link(page: Page, seed: Seed) -> None:
    page.get_by_label("Email").fill(LONG_EMAIL)  # nobody's: the same answer, the longest line
    page.get_by_role("button", name="Email me a link").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    owner = db.session.scalar(select(Owner).where(Owner.email == OWNER_EMAIL))
    links = ResetLinks(seed["secret_key"], seed["base_url"])
    seed["reset_token"] = links.make(owner)
    seed["expired_reset_token"] = ResetLinks(seed["secret_key"], seed["base_url"],
                                             clock=lambda: time.time() - 7200).make(owner)


def confirm_sign_up(page: Page, seed: Seed) -> None:
    page.get_by_role("button", name="Confirm my subscription").click()
    expect(page.get_by_role("heading", name="You are subscribed")).to_be_visible()


def unsubscribe(page: Page, seed: Seed) -> None:
    page.get_by_role("button", name="Unsubscribe").click()
    expect(page.get_by_role("heading", name="You are unsubscribed")).to_be_visible()


def erase_me(page: Page, seed: Seed) -> None:
    page.get_by_role("button", name="Erase everything about me").click()
    expect(page.get_by_role("heading", name="This address is no longer on our lists")).to_be_visible()


def resubscribe(page: Page, seed: Seed) -> None:
    page.get_by_role("button", name="Resubscribe to " + LONG_LIST).click()
    expect(page.get_by_role("heading", name="You are subscribed again")).to_be_visible()


# ---------------------------------------------------------------- the pages

# Walked before signing in, in this order (a step may add to the Seed for a later visit).
PUBLIC_PAGES = [
    Visit("sign in", "auth.login"),
    Visit("error 404 (visitor)", None, status=404),
    Visit("sign-up form", "signup.join", {"list_id": "weekly"}),
    Visit("sign-up: check your inbox", "signup.join", {"list_id": "weekly"}, then=sign_up),
    Visit("sign-up: check your inbox, reloaded", "signup.check_inbox", {"list_id": "weekly"}),
    Visit("sign-up: confirm", "signup.confirm_page", {"token": "signup_token"}),
    Visit("sign-up: confirmed", "signup.confirm_page", {"token": "signup_token"}, then=confirm_sign_up),
    Visit("unsubscribe: confirm", "unsubscribe.confirm", {"token": "unsubscribe_token"}),
    Visit("unsubscribe: done", "unsubscribe.confirm", {"token": "unsubscribe_token"}, then=unsubscribe),
    Visit("unsubscribe: already unsubscribed", "unsubscribe.confirm", {"token": "unsubscribe_token"}),
    Visit("unsubscribe: resubscribed", "unsubscribe.confirm", {"token": "unsubscribe_token"},
          then=resubscribe),
    Visit("unsubscribe: preferences", "unsubscribe.preferences", {"token": "unsubscribe_token"}),
    Visit("unsubscribe: broken link", "unsubscribe.confirm", {"token": "bad_token"}, status=400),
    Visit("your data: erase, asked first", "unsubscribe.confirm_erase", {"token": "erase_token"}),
    Visit("your data: erased", "unsubscribe.confirm_erase", {"token": "erase_token"}, then=erase_me),
    Visit("your data: a link after the erase", "unsubscribe.preferences", {"token": "erase_token"},
          status=404),
    Visit("archive", "archive.index", {"list_id": "weekly"}),
    Visit("archive issue", "archive.issue", {"list_id": "weekly", "broadcast_id": "sent",
                                             "slug": "archive_slug"}),
    Visit("view in browser", "archive.view", {"token": "view_token"}),
    Visit("view in browser: broken link", "archive.view", {"token": "bad_token"}, status=400),
    Visit("forgot password", "auth.forgot_password"),
    Visit("forgot password: check your inbox", "auth.forgot_password", then=ask_for_reset_link),
    Visit("new password", "auth.reset_password", {"token": "reset_token"}),
    Visit("new password: broken link", "auth.reset_password", {"token": "bad_token"}, status=400),
    Visit("new password: expired link", "auth.reset_password", {"token": "expired_reset_token"},
          status=410),
]

# Walked signed in as the owner.
OWNER_PAGES = [
    Visit("dashboard", "dashboard.home"),
    Visit("broadcasts", "broadcasts.index"),
    Visit("broadcast editor", "broadcasts.edit", {"broadcast_id": "draft"}),
    Visit("send confirmation", "broadcasts.confirm_send", {"broadcast_id": "draft"}),
    Visit("sent broadcast", "broadcasts.show", {"broadcast_id": "sent"}),
    Visit("deliveries", "broadcasts.deliveries", {"broadcast_id": "sent"}),
    Visit("delivery timeline", "broadcasts.timeline", {"broadcast_id": "sent", "delivery_id": "delivery"}),
    Visit("send again", "broadcasts.confirm_retry", {"broadcast_id": "sent", "which": "unknown"}),
    Visit("send again to those who did not open", "analytics.resend_confirm", {"broadcast_id": "sent"}),
    Visit("email preview", "broadcasts.preview_frame", {"broadcast_id": "draft"}),
    Visit("broadcast editor, plain-text view", "broadcasts.edit",
          {"broadcast_id": "draft", "view": "text"}),
    Visit("email preview, Apple Mail dark", "broadcasts.preview_frame",
          {"broadcast_id": "draft", "view": "apple-dark"}),
    Visit("email preview, Gmail dark", "broadcasts.preview_frame",
          {"broadcast_id": "draft", "view": "gmail-dark"}),
    Visit("lists", "lists.index"),
    Visit("list", "lists.show", {"list_id": "weekly"}),
    Visit("delete list", "lists.confirm_delete", {"list_id": "weekly"}),
    Visit("departures", "suppression.list_departures", {"list_id": "weekly"}),
    Visit("subscribers", "subscribers.index"),
    Visit("subscribers: how many (no JavaScript)", "subscribers.total", {"q": "example"}),
    Visit("subscriber", "subscribers.show", {"subscriber_id": "bounced"}),
    Visit("edit subscriber", "subscribers.edit", {"subscriber_id": "long"}),
    Visit("new subscriber", "subscribers.new"),
    Visit("delete subscriber", "subscribers.confirm_delete", {"subscriber_id": "long"}),
    Visit("lift suppression", "suppression.lift", {"subscriber_id": "bounced"}),
    Visit("import", "subscribers.import_csv"),
    Visit("import status", "subscribers.import_status", {"import_id": "import_"}),
    Visit("bulk: confirm an erase of everyone matching", "subscribers.bulk_confirm",
          {"action": "erase", "scope": "all", "q": "example"}),
    Visit("bulk: add the ticked to a list", "subscribers.bulk_confirm",
          {"action": "add", "scope": "selected", "ids": "long", "target": "weekly"}),
    Visit("bulk: progress", "subscribers.bulk_status", {"bulk_id": "bulk"}),
    Visit("segments", "segments.index"),
    Visit("new segment", "segments.new"),
    Visit("segment", "segments.edit", {"segment_id": "segment"}),
    Visit("segment's people", "segments.people", {"segment_id": "segment"}),
    Visit("delete segment", "segments.confirm_delete", {"segment_id": "segment"}),
    Visit("automations", "automations.index"),
    Visit("new automation", "automations.new"),
    Visit("automation", "automations.edit", {"automation_id": "automation"}),
    Visit("delete automation", "automations.delete", {"automation_id": "automation"}),
    Visit("step preview", "automations.preview", {"automation_id": "automation", "step_id": "step"}),
    Visit("automation's failed messages", "automations.messages", {"automation_id": "automation"}),
    Visit("media", "media.index"),
    Visit("delete an image", "media.confirm_delete", {"media_id": "image"}),
    Visit("settings", "settings.index"),
    Visit("security", "security.index"),
    Visit("design", "settings.design_page"),
    Visit("design: the sample email", "settings.design_preview_email"),
    Visit("design: the confirmation email", "settings.design_preview_confirmation"),
    Visit("API reference", "apidocs.api_reference"),
    Visit("webhooks", "settings.webhooks_page"),
    Visit("audit log", "audit.index"),
    Visit("webhook endpoint", "settings.webhook_page", {"endpoint_id": "endpoint"}),
    Visit("disabled webhook endpoint", "settings.webhook_page", {"endpoint_id": "disabled_endpoint"}),
    Visit("templates", "library.index"),
    Visit("template: the email previewed", "library.preview", {"ref": "builtin:announcement"}),
    Visit("edit template", "library.edit", {"message_template_id": "message_template"}),
    Visit("save as template", "library.save_as_form", {"broadcast_id": "sent"}),
    Visit("blocks", "library.blocks_index"),
    Visit("block", "library.block", {"block_id": "block"}),
    Visit("transactional templates", "transactional.index"),
    Visit("new transactional template", "transactional.new"),
    Visit("transactional template", "transactional.show", {"template_id": "template"}),
    Visit("transactional template: the email previewed", "transactional.preview_email",
          {"template_id": "template"}),
    Visit("sending identities", "identities.index"),
    Visit("edit identity", "identities.edit", {"identity_id": "identity"}),
    Visit("delete identity", "identities.delete", {"identity_id": "identity"}),
    Visit("deliverability", "deliverability.index"),
    Visit("system", "system.index"),
    Visit("outbox message", "system.outbox_message", {"name": "outbox_file"}),
    Visit("outbox message's HTML", "system.outbox_html", {"name": "outbox_file"}),
    Visit("error 404 (owner)", None, status=404),
]

# GET routes that are not pages, each with the reason.
NOT_PAGE_PREFIXES = {"api.": "the JSON API (checked against its OpenAPI document in tests/webapp)"}
NOT_PAGES = {
    "static": "files",
    "health.healthz": "a probe's plain answer",
    "health.readyz": "a probe's plain answer",
    "metrics.metrics": "Prometheus text",
    "apidocs.openapi": "JSON",
    "archive.feed": "an Atom feed (XML)",
    "subscribers.export_csv": "a CSV download",
    "subscribers.import_rejections": "a CSV download",
    "dashboard.recent": "an htmx fragment of the dashboard",
    "broadcasts.progress": "an htmx fragment of the broadcast page",
    "broadcasts.preview_pane": "an htmx fragment: the editor's preview pane, walked as the editor's own",
    "broadcasts.preview_people": "an htmx fragment: the Preview as field's <datalist>",
    "broadcasts.test_status": "an htmx fragment: a test send's status line",
    "subscribers.import_progress": "an htmx fragment of the import status page",
    "subscribers.import_welcome_hint": "an htmx fragment of the import form",
    "subscribers.bulk_progress": "an htmx fragment of the bulk action's page",
    "settings.design_preview": "an htmx fragment of the Design page",
    "brand.logo": "an image",
    "media.file": "an image of the media library",
    "media.library_json": "JSON: the image picker's list",
    "favicon.icon": "an image (every walked page asks for its favicon)",
    "brand.theme": "a stylesheet",
    "analytics.pixel": "a tracked email's 1x1 image",
    "analytics.click": "a tracked email's link: a redirect",
    "automations.counts": "an htmx fragment of the automations page",
    "system.checks": "an htmx fragment of the System page",
    "system.live": "an htmx fragment of the System page",
    "identities.dns": "an htmx fragment of the identities page: an identity's DNS checks",
    "identities.dns_default": "an htmx fragment of the identities page: the default's DNS checks",
    "auth.setup": "walked first, before the owner exists (it is a 404 afterwards)",
    "auth.reset_sent": "walked as the page the request for a link leads to",
    "auth.two_factor": "needs a pending sign-in: walked at both widths in test_two_factor_pages.py",
    "auth.enrol_two_factor": "needs a pending sign-in: walked at both widths in test_two_factor_pages.py",
    "security.enrol": "needs an enrolment begun: walked at both widths in test_two_factor_pages.py",
    "security.recovery_codes": "shown once after an enrolment: walked in test_two_factor_pages.py",
    "people.index": "walked at both widths, with axe, by tests/browser/test_people_pages.py",
    "people.confirm_remove": "walked at both widths, with axe, by tests/browser/test_people_pages.py",
    "people.accept": "walked at both widths, with axe, by tests/browser/test_people_pages.py "
                     "(the form, and a used link)",
}


def test_every_get_route_is_walked_or_excluded_with_a_reason(app: Flask):
    walked = {v.endpoint for v in PUBLIC_PAGES + OWNER_PAGES if v.endpoint}
    get_routes = {rule.endpoint for rule in app.url_map.iter_rules() if "GET" in (rule.methods or ())
                  and not rule.endpoint.startswith(tuple(NOT_PAGE_PREFIXES))}
    forgotten = sorted(get_routes - walked - set(NOT_PAGES))
    assert not forgotten, (f"add these pages to OWNER_PAGES or PUBLIC_PAGES in {Path(__file__).name}, "
                           f"or to NOT_PAGES with a reason: {forgotten}")
    assert not walked & set(NOT_PAGES), "a page is both walked and excluded"
    stale = sorted((walked | set(NOT_PAGES)) - get_routes)
    assert not stale, f"no such GET route: {stale}"


# ---------------------------------------------------------------- the seeded data

def reader(i: int) -> str:
    return LONG_EMAIL if i == 0 else f"reader.number.{i}.with.a.long.address@subscribers.{LONG_DOMAIN}"


def run_worker_until_idle(app: Flask) -> None:
    """The real worker in burst mode, with no SMTP_URL: every message becomes an outbox file."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        run_worker(from_flask(app), burst=True)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        db.session.expire_all()


def seed_everything(app: Flask) -> Seed:
    design.store_logo(db.session, png(640, 160, (20, 20, 90)),
                      base_url=app.config["BASE_URL"])
    look = design.DesignInput(colour="#0b6e4f", width="640", font=SEED_FONT,
                              footer_text="Acme Weekly comes out every Friday. " * 3)
    design.update_design(db.session, look, base_url=app.config["BASE_URL"])
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="Europe/Berlin")
    weekly = lists.create_list(db.session, LONG_LIST, "Everything that happened at Acme, " * 4,
                               signup_enabled=True)
    daily = lists.create_list(db.session, "Daily Digest")
    people = []
    for i in range(6):
        person = Subscriber(email=reader(i), name=LONG_NAME if i == 0 else f"Reader {i}",
                            attributes={"city": LONG_TOWN, "plan": "pro"})
        db.session.add(person)
        db.session.flush()
        for mailing_list in (weekly.id, daily.id):
            db.session.add(Subscription(subscriber_id=person.id, list_id=mailing_list, status="active"))
        people.append(person.id)
    db.session.commit()

    body = ("# Autumn at Acme\n\nHi {{ name }}, read https://acme.example.com/changelog/2026/"
            "november-release-notes-with-a-very-long-address-indeed or reply.")
    first = drafts.create_draft(db.session, list_id=weekly.id, subject=LONG_SUBJECT, body=body)
    sent = send_broadcast(db.session, first.id, default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker_until_idle(app)  # before any other identity exists: one process, no children
    outbox = sorted(p.name for p in (Path(app.instance_path) / "outbox").glob("*.eml"))
    delivery = db.session.scalar(select(Delivery.id).where(Delivery.broadcast_id == sent.id)
                                 .order_by(Delivery.id))
    record_bounce(db.session, reader(1), "hard", source="test",
                  detail=f"550 5.1.1 <{LONG_EMAIL}>: Recipient address rejected: User unknown")
    suppress(db.session, people[2], "blocked", "Asked by phone never to be written to again, twice.")
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject=LONG_SUBJECT, body=body)

    segment = segments.create_segment(db.session, "Readers in a town with a remarkably long name", {"all": [
        {"field": "attributes.city", "op": "equals", "value": LONG_TOWN},
        {"field": "list", "op": "is_on", "value": weekly.id}]})
    automation = automations.enable(db.session, automations.create_automation(
        db.session, automations.parse_input({
            "name": "Welcome series for the Remarkably Thorough Weekly Dispatch",
            "trigger": {"type": "joined_list", "list_id": weekly.id},
            "steps": [{"delay": "PT0S", "subject": LONG_SUBJECT, "body": body},
                      {"delay": "P3D", "subject": "Three things our readers love", "body": "Tips"}]}),
        default_from=app.config["MAIL_FROM"]).id)
    entering.enter_joined(db.session, weekly.id, [people[1], *people[3:]], source="joined")
    db.session.commit()
    identity = identities.create(db.session, identities.parse_input({
        "name": "Product announcements from the Frankfurt relay",
        "from": f"Acme Product Announcements <product-announcements@{LONG_DOMAIN}>",
        "transport": "smtp://127.0.0.1:9"}))

    csv = (f"email,name\n{LONG_EMAIL},{LONG_NAME}\n"
           "not-an-address-but-a-remarkably-long-string-of-characters-without-any-at-sign,Nobody\n").encode()
    upload = receive_upload(db.session, weekly.id, "november-import-from-the-old-system.csv", io.BytesIO(csv),
                            import_dir(app.instance_path), max_bytes=1_000_000, consent="opted_in")
    process(db.session, upload.id, import_path(app.instance_path, upload.id))
    planned = bulk.plan(db.session, action="add", list_id=daily.id, scope="all", ids=[],
                        filters=Filters(q="example"))
    queued_bulk = bulk.submit(db.session, planned, lambda _id: None)  # waits for a worker
    # Erased from the public pages (on the daily list only: no delivery row changes).
    leaving = Subscriber(email="erase.me." + LONG_EMAIL, name=LONG_NAME)
    db.session.add(leaving)
    db.session.flush()
    db.session.add(Subscription(subscriber_id=leaving.id, list_id=daily.id, status="active"))
    # The weekly list's public archive, with the sent broadcast published; its first
    # reader's view-in-browser link.
    archive.set_archive(db.session, weekly.id, True)
    archive_slug = archive.publish(db.session, sent.id, True).slug
    viewer, joined = db.session.execute(select(Subscriber.id, Subscriber.created_at).join(
        Delivery, Delivery.subscriber_id == Subscriber.id).where(Delivery.id == delivery)).one()
    view_token = ViewTokens(app.config["SECRET_KEY"]).make(delivery, sent.id, viewer, joined)
    step = db.session.scalar(select(AutomationStep.id).where(AutomationStep.automation_id == automation.id)
                             .order_by(AutomationStep.position))
    endpoint, disabled_endpoint = seed_webhooks()
    template = seed_transactional(app, identity.id)
    block = content_blocks.create_block(db.session, name="Sponsor box of the remarkably long Weekly Dispatch",
                                        body=f"Thanks to **{LONG_NAME}** of {LONG_DOMAIN}.")
    message_template = message_templates.save_as_template(
        db.session, draft.id, name=LONG_LIST + ": the issue", description=LONG_SUBJECT)
    message_templates.update_template(db.session, message_template.id, name=message_template.name,
                                      description=LONG_SUBJECT,
                                      design={"colour": "#aa3300", "width": "720", "font": "serif",
                                              "footer_text": LONG_TOWN})
    # A test send the server refused, for the System page's recent errors (the row as the worker
    # leaves it: no server here refuses anything).
    db.session.add(TransactionalMessage(
        kind="test", to_email=LONG_EMAIL, subject=LONG_SUBJECT, status="failed", attempts=1,
        reason=f"The server refused the address: 550 5.1.1 <{LONG_EMAIL}>: Recipient address rejected"))
    # A confirmation to the person whose page is walked, its content removed after the
    # retention: its 64-digit hash on a phone.
    bounced = db.session.get(Subscriber, people[1])
    assert bounced is not None
    month_ago = utcnow() - timedelta(days=31)
    db.session.add(TransactionalMessage(
        kind="confirmation", to_email=bounced.email, subscriber_id=bounced.id, subject="Confirm",
        status="sent", created_at=month_ago, sent_at=month_ago))
    db.session.commit()
    remove_due(db.session)

    # An image with a long name, named by the draft's plain-text part (in its body, the
    # sanitiser would drop its http address): the library says where it is used, and its
    # delete page refuses.
    image = media_library.upload(db.session, png(1400, 500, (200, 120, 30)),
                                 filename=f"{LONG_TOWN}-harbour-panorama.png", alt="",
                                 design_width=640, uploaded_by=None).media
    held = db.session.get(Broadcast, draft.id)
    held.text_body = "The harbour: " + media_library.url_of(image, base_url=app.config["BASE_URL"])
    db.session.commit()

    return Seed(
        block=block.id, message_template=message_template.id,
        image=image.id,
        weekly=weekly.id, long=people[0], bounced=people[1], sent=sent.id, delivery=delivery, draft=draft.id,
        segment=segment.id, automation=automation.id, step=step, identity=identity.id, import_=upload.id,
        bulk=queued_bulk.id, endpoint=endpoint, disabled_endpoint=disabled_endpoint, template=template,
        outbox_file=outbox[0], unsubscribe_token=make_token(people[0], weekly.id),
        erase_token=make_token(leaving.id, daily.id),
        bad_token="this-link-was-cut-in-half", secret_key=app.config["SECRET_KEY"],
        base_url=app.config["BASE_URL"], archive_slug=archive_slug, view_token=view_token,
    )


def seed_transactional(app: Flask, identity_id: int) -> int:
    """A transactional template with a long name on the other identity, one deleted, and a
    send from each (one refused with a long reason)."""
    made = []
    for name in (LONG_LIST + ": password reset", "Receipt"):
        made.append(transactional.create_template(db.session, transactional.parse_template(db.session, {
            "name": name, "subject": LONG_SUBJECT, "essential": True, "identity_id": identity_id,
            "body": "Hi {{ name }}, [a new password](https://acme.example.com/reset/{{ data.token }})."}),
            default_from=app.config["MAIL_FROM"]))
    for template, status in zip(made, ("failed", "sent"), strict=True):
        revision = transactional.newest_revision(db.session, template.id)
        assert revision is not None
        db.session.add(TransactionalMessage(
            kind="template", to_email=LONG_EMAIL, subject=LONG_SUBJECT, status=status, attempts=1,
            template_revision_id=revision.id,
            reason=f"The server refused the address: 550 5.1.1 <{LONG_EMAIL}>: Recipient address rejected"
            if status == "failed" else "250 OK queued"))
    db.session.commit()
    transactional.delete_template(db.session, made[1].id)
    return made[0].id


def seed_webhooks() -> tuple[int, int]:
    """Two endpoints with long URLs (rows written directly: their hosts need no DNS here), one
    disabled by a day of failures, and a delivery log with every status."""
    url = f"https://hooks.{LONG_DOMAIN}/integrations/broadside/events?account=acme-{'x' * 40}"
    endpoint = WebhookEndpoint(url=url, events="," + ",".join(EVENT_TYPES) + ",", secret="whsec_" + "s" * 43)
    disabled = WebhookEndpoint(url=url.replace("hooks.", "old-hooks."), events=",delivery.sent,",
                               secret="whsec_" + "t" * 43, status="disabled",
                               disabled_reason="Disabled by Broadside: every delivery failed for 24 hours. "
                               f"Last error: No answer from old-hooks.{LONG_DOMAIN}: connection refused")
    db.session.add_all([endpoint, disabled])
    db.session.flush()
    now = utcnow()
    rows = [("delivered", 200, 1, None), ("pending", 503, 3, "HTTP 503: " + "Service Unavailable " * 10),
            ("failed", None, 12, f"No answer from hooks.{LONG_DOMAIN}: timed out"),
            ("pending", None, 0, None)]
    for i, (status, code, attempts, error) in enumerate(rows):
        db.session.add(WebhookMessage(
            endpoint_id=endpoint.id, event_id=f"evt_{i:032x}", event_type=EVENT_TYPES[i], data={},
            status=status, response_code=code, attempts=attempts, last_error=error, created_at=now,
            next_attempt_at=now, updated_at=now, delivered_at=now if status == "delivered" else None))
    return endpoint.id, disabled.id


# ---------------------------------------------------------------- what is checked on each page

# Text wider than its own box (out of its card, or widening the page), outside the boxes that
# scroll on purpose; then every box that scrolls sideways, which must take the keyboard focus.
LAYOUT_PROBLEMS = """() => {
  const root = document.documentElement, problems = [], out = [];
  if (root.scrollWidth > root.clientWidth)
    problems.push(`the page scrolls sideways by ${root.scrollWidth - root.clientWidth} px`);
  const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  const describe = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
    + (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\\s+/).join('.') : '')
    + ' "' + (e.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 60) + '"';
  for (const e of document.body.querySelectorAll('*')) {
    if (!e.checkVisibility() || e.clientWidth === 0) continue;
    if (scrolls(e)) {
      const reachable = e.tabIndex >= 0 || e.querySelector('a, button, input, select, textarea, [tabindex]');
      if (e.scrollWidth > e.clientWidth + 1 && !reachable)
        problems.push('scrolls but cannot be reached by keyboard: ' + describe(e));
      continue;
    }
    if (getComputedStyle(e).overflowX !== 'visible') continue;
    let inside = e.parentElement, scrolled = false;
    for (; inside; inside = inside.parentElement) if (scrolls(inside)) { scrolled = true; break; }
    if (!scrolled && e.scrollWidth > e.clientWidth + 1) out.push(e);
  }
  // The innermost boxes only: their ancestors overflow because of them.
  const innermost = out.filter(e => !out.some(o => o !== e && e.contains(o)));
  return problems.concat(innermost.map(e => 'text out of its box: ' + describe(e)));
}"""

# The page's favicon: the icons its links name, or /favicon.ico where there is none (what a
# browser asks for then).
FAVICONS = """() => {
  const links = [...document.querySelectorAll('link[rel~=icon]')].map(link => link.href);
  return links.length ? links : [location.origin + '/favicon.ico'];
}"""

# The page's own htmx requests answered and its transitions over (a fading "Counting…" line
# would be judged at half its contrast).
SETTLED = """() => !document.querySelector('.htmx-request')
  && document.getAnimations().every(a => a.playState !== 'running')"""

AXE_RUN = """async () => {
  const result = await axe.run(document, {
    runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
    resultTypes: ['violations'], iframes: false});
  return result.violations.filter(v => ['serious', 'critical'].includes(v.impact)).flatMap(
    v => v.nodes.map(n => `axe ${v.id} (${v.impact}): ${v.help}; at ${n.target.join(' ')}: `
                          + n.html.slice(0, 120)));
}"""


def photograph(page: Page, visit: Visit, folder: Path, width: int) -> None:
    if visit.label in SCREENSHOTS or os.environ.get("BROADSIDE_SCREENSHOTS") == "all":
        name = re.sub(r"[^a-z0-9]+", "-", visit.label.lower()).strip("-")
        page.screenshot(path=str(folder / f"every-page-{name}-{width}.png"), full_page=True, timeout=30_000)


def font_stack(key: str) -> str:
    """A design font's stack as the browser reports a computed font-family."""
    return ", ".join(name.strip() for name in FONTS[key][1].split(","))


def axe(page: Page, visit: Visit, url: str, width: int, problems: list[str]) -> None:
    # Not page.add_script_tag: the app's Content-Security-Policy (script-src 'self') refuses an
    # injected script, and bypassing CSP would walk pages unlike the owner's. An evaluated
    # script is the browser's own, which CSP does not govern.
    if not page.evaluate("() => typeof axe === 'object'"):
        page.evaluate(AXE_SOURCE)
    for problem in page.evaluate(AXE_RUN):
        problems.append(f"{visit.label} at {width} px ({url}): {problem}")


def check(page: Page, visit: Visit, url: str, seed: Seed, problems: list[str], folder: Path,
          public: bool = False) -> None:
    page.set_viewport_size({"width": PHONE, "height": 800})
    response = page.goto(url)
    assert response is not None
    if visit.then is not None:
        visit.then(page, seed)
    elif response.status != visit.status:
        problems.append(f"{visit.label} ({url}): HTTP {response.status}, expected {visit.status}")
    page.wait_for_function(SETTLED)
    page.wait_for_function("() => [...document.images].every(i => i.complete)")
    for broken in page.evaluate("() => [...document.images].filter(i => !i.naturalWidth).map(i => i.src)"):
        problems.append(f"{visit.label} ({url}): the image {broken} did not load")
    tables = table_problems(page, STACKED.get(visit.label, []))
    for problem in page.evaluate(LAYOUT_PROBLEMS) + tables:
        problems.append(f"{visit.label} at {PHONE} px ({url}): {problem}")
    for icon in page.evaluate(FAVICONS):
        answer = page.request.get(icon) if icon.startswith(url.split("/", 3)[0] + "//") else None
        if answer is None or not answer.ok or not answer.headers["content-type"].startswith("image/"):
            problems.append(f"{visit.label} ({url}): no favicon at {icon[:60]}"
                            + (f" (HTTP {answer.status})" if answer else ""))
    if public and visit.label not in UNBRANDED:
        font = page.evaluate("() => getComputedStyle(document.body).fontFamily")
        if not page.locator("#brand-header").count() or font != font_stack(SEED_FONT):
            problems.append(f"{visit.label} ({url}): the font is {font}, not {font_stack(SEED_FONT)}")
    photograph(page, visit, folder, PHONE)
    axe(page, visit, url, PHONE, problems)
    page.set_viewport_size({"width": DESKTOP, "height": 800})
    for problem in page.evaluate(LAYOUT_PROBLEMS):
        problems.append(f"{visit.label} at {DESKTOP} px ({url}): {problem}")
    photograph(page, visit, folder, DESKTOP)
    axe(page, visit, url, DESKTOP, problems)


def walk(app: Flask, page: Page, base_url: str, visits: list[Visit], seed: Seed, problems: list[str],
         folder: Path, public: bool = False) -> None:
    for visit in visits:
        if visit.endpoint is None:
            path = "/no-such-page"
        else:
            with app.test_request_context():
                args = {arg: seed.get(name, name) for arg, name in visit.args.items()}
                path = url_for(visit.endpoint, **args)
        check(page, visit, base_url + path, seed, problems, folder, public)


def test_every_page_fits_a_phone_and_passes_axe(app: Flask, page: Page, live_server, screenshot_dir):
    page.set_default_timeout(5_000)
    app.config["BASE_URL"] = live_server.url  # the logo's address in emails, as on a real install
    seed = seed_everything(app)
    problems: list[str] = []
    check(page, Visit("first-run setup", "auth.setup"), live_server.url + "/setup", seed, problems,
          screenshot_dir)
    owner = accounts.create_owner(db.session, OWNER_EMAIL, OWNER_PASSWORD)
    accounts.create_token(db.session, owner.id, "Zapier: the weekly dispatch's remarkably long integration")
    walk(app, page, live_server.url, PUBLIC_PAGES, seed, problems, screenshot_dir, public=True)
    sign_in(page, live_server.url)
    walk(app, page, live_server.url, OWNER_PAGES, seed, problems, screenshot_dir)
    assert not problems, "\n".join(problems)
    list_page = live_server.url + f"/lists/{seed['weekly']}"
    phone_menu_and_a_wide_table(page, list_page, screenshot_dir)
    deliveries_on_a_phone(page, live_server.url + f"/broadcasts/{seed['sent']}/deliveries")


def deliveries_on_a_phone(page: Page, url: str) -> None:
    """One block per delivery: what happened (an outbox file name) takes the whole width, in a
    few lines rather than seven; and it is still a table to a screen reader."""
    page.set_viewport_size({"width": PHONE, "height": 800})
    page.goto(url)
    what = page.locator(".what-cell").first
    expect(what).to_contain_text(".eml")
    lines = what.evaluate("e => e.offsetHeight / parseFloat(getComputedStyle(e).lineHeight)")
    assert lines <= 5, f"what happened takes {lines:.0f} lines on a phone"
    table = page.get_by_role("table")
    expect(table.get_by_role("row")).to_have_count(7)  # the header and six deliveries
    expect(table.get_by_role("columnheader", name="What happened")).to_have_count(1)
    expect(table.get_by_role("cell", name=LONG_NAME)).to_have_count(1)


def phone_menu_and_a_wide_table(page: Page, list_url: str, folder: Path) -> None:
    """The phone's "Menu" (one row closed, opened from the keyboard, the current section marked)
    and a table too wide for the phone (the departures): one block per row, nothing to scroll,
    and still a table with its column headers to a screen reader."""
    page.set_viewport_size({"width": PHONE, "height": 800})
    page.goto(list_url)
    bar = page.locator("header.topbar")
    assert (bar.bounding_box() or {"height": 999})["height"] < 64, "the phone's top bar is more than one row"
    menu = page.locator("details.nav-menu")
    expect(page.locator("nav.nav-wide")).to_be_hidden()
    expect(menu.get_by_role("link", name="Subscribers")).to_be_hidden()
    page.screenshot(path=str(folder / "every-page-phone-menu-closed.png"))
    menu.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(menu.get_by_role("link", name="Subscribers")).to_be_visible()
    expect(menu.get_by_role("link", name="Lists")).to_have_attribute("aria-current", "page")
    expect(menu.get_by_role("button", name="Sign out")).to_be_visible()
    page.screenshot(path=str(folder / "every-page-phone-menu-open.png"))
    page.keyboard.press("Enter")
    expect(menu.get_by_role("link", name="Subscribers")).to_be_hidden()

    box = page.locator("#departures .table-wrap")
    assert box.evaluate("e => e.scrollWidth <= e.clientWidth"), "the departures table scrolls sideways"
    table = box.get_by_role("table")
    expect(table.get_by_role("columnheader", name="Why / how")).to_have_count(1)
    bounce = table.get_by_role("row").filter(has_text="Recipient address rejected").first
    assert bounce.evaluate("r => r.offsetWidth <= r.parentElement.clientWidth"), "a departure is too wide"
    expect(bounce.get_by_role("cell", name=reader(1))).to_have_attribute("data-label", "Who")
    box.scroll_into_view_if_needed()
    page.screenshot(path=str(folder / "every-page-phone-departures.png"))

    page.set_viewport_size({"width": DESKTOP, "height": 800})
    expect(menu).to_be_hidden()
    wide = page.locator("nav.nav-wide")
    expect(wide.get_by_role("link", name="Lists")).to_have_attribute("aria-current", "page")


def in_language(page: Page, visit: Visit, url: str, locale: str, problems: list[str],
                folder: Path) -> None:
    """One page at phone width in `locale`: it says so in `<html lang>`, and its longer words
    (German's above all) still fit: nothing scrolls sideways, no text leaves its box."""
    response = page.goto(url)
    assert response is not None
    if response.status != visit.status:  # a page that needs a step before it (English walk)
        return
    page.wait_for_function(SETTLED)
    lang = page.evaluate("() => document.documentElement.lang")
    if lang != locale and visit.label not in OTHER_LANGUAGE:
        problems.append(f"{visit.label} ({url}): <html lang={lang!r}>, expected {locale}")
    for problem in page.evaluate(LAYOUT_PROBLEMS) + table_problems(page, STACKED.get(visit.label, [])):
        problems.append(f"{visit.label} at {PHONE} px in {locale} ({url}): {problem}")
    if visit.label in SCREENSHOTS or os.environ.get("BROADSIDE_SCREENSHOTS") == "all":
        name = re.sub(r"[^a-z0-9]+", "-", visit.label.lower()).strip("-")
        page.screenshot(path=str(folder / f"every-page-{locale}-{name}-{PHONE}.png"),
                        full_page=True, timeout=30_000)


# Pages whose language is not the browser's on purpose: an email shown as it is and an
# archived issue (the message's own language: the seeded ones are English), and the API's
# reference, in English like the API.
OTHER_LANGUAGE = {"API reference", "view in browser", "archive issue", "email preview",
                  "email preview, Apple Mail dark", "email preview, Gmail dark", "step preview",
                  "design: the sample email", "design: the confirmation email",
                  "template: the email previewed", "transactional template: the email previewed",
                  "outbox message's HTML"}


LOCALES = ("de", "fr", "es")


def test_every_page_fits_a_phone_in_each_language(app: Flask, page: Page, live_server, screenshot_dir):
    """The walk above at 390 px in each language Broadside ships, the browser asking for it:
    the pages reached without a form (those behind one are walked in English above). One
    seed for the three walks: the data is the same whatever the language."""
    page.set_default_timeout(5_000)
    page.set_viewport_size({"width": PHONE, "height": 800})
    app.config["BASE_URL"] = live_server.url
    seed = seed_everything(app)
    owner = accounts.create_owner(db.session, OWNER_EMAIL, OWNER_PASSWORD)
    accounts.create_token(db.session, owner.id, "Zapier: the weekly dispatch's remarkably long integration")
    problems: list[str] = []

    def visit_all(visits: list[Visit], locale: str) -> None:
        page.set_extra_http_headers({"Accept-Language": f"{locale},en;q=0.5"})
        for visit in visits:
            if visit.then is not None:
                continue
            path = "/no-such-page"
            if visit.endpoint is not None:
                with app.test_request_context():
                    path = url_for(visit.endpoint, **{arg: seed.get(name, name)
                                                      for arg, name in visit.args.items()})
            in_language(page, visit, live_server.url + path, locale, problems, screenshot_dir)

    for locale in LOCALES:  # the public pages as a reader sees them: signed out
        visit_all(PUBLIC_PAGES, locale)
    page.set_extra_http_headers({})
    sign_in(page, live_server.url)
    for locale in LOCALES:
        visit_all(OWNER_PAGES, locale)
    assert not problems, "\n".join(problems)
