"""A small installation with one of everything an owner page shows, for the tests that look
at the pages as each role sees them (tests/webapp/test_buttons_by_role.py and
tests/browser/test_roles_pages.py): lists, subscribers, a draft, a scheduled and a sent
broadcast, a segment, an automation on and one off, an identity, a webhook endpoint, a
transactional template. Rows are made by the domain's own functions, as an owner's clicks
would make them; only the webhook endpoint is written directly (its host needs no DNS here).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from flask import Flask
from sqlalchemy import select

from broadside.audience import lists
from broadside.campaigns.automations import service as automations
from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import schedule_broadcast, send_broadcast
from broadside.campaigns.content import blocks as content_blocks
from broadside.campaigns.content import templates as message_templates
from broadside.campaigns.transactional import templates as transactional
from broadside.core.models import Delivery, Owner, Subscriber, Subscription, WebhookEndpoint
from broadside.core.models.automations import AutomationStep
from broadside.core.site_settings import update_settings
from broadside.core.timeutil import utcnow
from broadside.delivery.identities import service as identities
from broadside.mail import media as media_library
from broadside.segments import service as segments
from broadside.webhooks import EVENT_TYPES
from tests.media_images import still
from webapp.extensions import db, get_jobs

BODY = "# News\n\nHi {{ name }}, read https://example.com/news or reply."


def seed_installation(app: Flask, run_worker: Callable[[], object]) -> dict[str, int]:
    """Seed every kind of row; `run_worker` sends the broadcast that ends up sent. Returns the
    ids by the names of the route arguments they fill (and a few more)."""
    update_settings(db.session, sender_name="Acme Weekly", sender_email="news@acme.example",
                    postal_address="Acme Ltd\n1 Main Street\nSpringfield", time_zone="Europe/Berlin")
    weekly = lists.create_list(db.session, "Weekly", "Everything that happened at Acme.")
    people = []
    for i in range(3):
        person = Subscriber(email=f"reader{i}@example.com", name=f"Reader {i}")
        db.session.add(person)
        db.session.flush()
        db.session.add(Subscription(subscriber_id=person.id, list_id=weekly.id, status="active"))
        people.append(person.id)
    db.session.commit()

    sent = send_broadcast(db.session, drafts.create_draft(
        db.session, list_id=weekly.id, subject="Sent news", body=BODY).id,
        default_from=app.config["MAIL_FROM"], jobs=get_jobs())
    run_worker()
    delivery = db.session.scalar(select(Delivery.id).where(Delivery.broadcast_id == sent.id)
                                 .order_by(Delivery.id))
    scheduled = drafts.create_draft(db.session, list_id=weekly.id, subject="Scheduled news", body=BODY)
    schedule_broadcast(db.session, scheduled.id, utcnow() + timedelta(days=2))
    draft = drafts.create_draft(db.session, list_id=weekly.id, subject="Draft news", body=BODY)

    segment = segments.create_segment(db.session, "Readers on Weekly", {"all": [
        {"field": "list", "op": "is_on", "value": weekly.id}]})

    def automation(name: str):
        return automations.create_automation(db.session, automations.parse_input({
            "name": name, "trigger": {"type": "joined_list", "list_id": weekly.id},
            "steps": [{"delay": "PT0S", "subject": "Welcome", "body": BODY}]}),
            default_from=app.config["MAIL_FROM"])
    on = automations.enable(db.session, automation("Welcome (on)").id)
    off = automation("Welcome (off)")
    step = db.session.scalar(select(AutomationStep.id).where(AutomationStep.automation_id == on.id))

    identity = identities.create(db.session, identities.parse_input({
        "name": "Product", "from": "Acme Product <product@acme.example>",
        "transport": "smtp://127.0.0.1:9"}))
    endpoint = WebhookEndpoint(url="https://hooks.acme.example/broadside",
                               events="," + ",".join(EVENT_TYPES) + ",", secret="whsec_" + "s" * 43)
    db.session.add(endpoint)
    db.session.commit()
    template = transactional.create_template(db.session, transactional.parse_template(db.session, {
        "name": "Password reset", "subject": "Your link", "essential": True,
        "body": "Hi {{ name }}, [a new password](https://acme.example/reset/{{ data.token }})."}),
        default_from=app.config["MAIL_FROM"])
    block = content_blocks.create_block(db.session, name="Sign-off",
                                        body="With thanks,\\\n**The Acme team**")
    saved = message_templates.save_as_template(db.session, draft.id, name="Weekly issue")
    colleague = Owner(email="colleague@acme.example", name="Colleague", role="writer",
                      password_hash="!")  # a person on the People page; never signs in
    db.session.add(colleague)
    db.session.commit()
    image = media_library.upload(db.session, still("PNG", 900, 300), filename="header.png",
                                 alt="The Acme header", design_width=600,
                                 uploaded_by=None).media
    return {"list_id": weekly.id, "person_id": colleague.id, "subscriber_id": people[0], "draft": draft.id,
            "scheduled": scheduled.id, "sent": sent.id, "delivery_id": delivery or 0,
            "segment_id": segment.id, "automation_on": on.id, "automation_off": off.id,
            "step_id": step or 0, "identity_id": identity.id, "endpoint_id": endpoint.id,
            "template_id": template.id, "message_template_id": saved.id, "block_id": block.id,
            "media_id": image.id}
