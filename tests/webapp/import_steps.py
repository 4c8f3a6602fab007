"""Steps the import tests share (import from here, never from a test module)."""

from __future__ import annotations

import io

from sqlalchemy import select

from broadside.core.models import Import, Subscriber, Subscription
from tests.helpers import csrf_token_from
from webapp.extensions import db


def upload(client, list_id: int, content: bytes, filename: str = "people.csv",
           consent: str | None = "opted_in"):
    """The import form, filled in and sent (`consent` None: the choice left unanswered)."""
    page = client.get(f"/subscribers/import?list={list_id}")
    data = {"list_id": str(list_id), "file": (io.BytesIO(content), filename),
            "csrf_token": csrf_token_from(page.text)}
    if consent is not None:
        data["consent"] = consent
    return client.post("/subscribers/import", data=data, content_type="multipart/form-data")


def statuses(list_id: int) -> dict[str, str]:
    return dict(db.session.execute(
        select(Subscriber.email, Subscription.status)
        .join(Subscription, Subscription.subscriber_id == Subscriber.id)
        .where(Subscription.list_id == list_id)
    ).all())


def last_import() -> Import:
    db.session.expire_all()
    return db.session.scalars(select(Import).order_by(Import.id.desc())).first()
