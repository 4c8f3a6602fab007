"""Who a broadcast went to, named the same on the dashboard, the broadcasts list and the
broadcast's page: its list, "segment NAME", or what became of them (a deleted segment, a
deleted list, a draft left without one), on SQLite and PostgreSQL."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import update

from broadside.audience.lists import delete_list
from broadside.campaigns.broadcasts import drafts
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.core.models import Broadcast
from broadside.segments import service as segments
from tests.helpers import make_list
from webapp.extensions import db

EVERYONE = {"all": [{"field": "email", "op": "contains", "value": "@"}]}


def sent(app, draft: Broadcast) -> int:
    """Press send, then mark it finished (the worker's part is not what is tested here)."""
    send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=None)
    db.session.execute(update(Broadcast).where(Broadcast.id == draft.id).values(status="sent"))
    db.session.commit()
    return draft.id


def audience_on_dashboard(page: str, subject: str) -> str:
    row = re.search(rf'>{re.escape(subject)}</a>\s*<br><span class="muted audience">([^<]*)</span>',
                    page)
    assert row, f"{subject} is not on the dashboard"
    return html.unescape(row.group(1))


def audience_in_index(page: str, subject: str) -> str:
    row = re.search(rf'>{re.escape(subject)}</a></td>\s*<td class="audience-cell">([^<]*)</td>', page)
    assert row, f"{subject} is not in the broadcasts list"
    return html.unescape(row.group(1))


def audience_on_page(page: str) -> str:
    line = re.search(r"· to ([^·]*) ·", page)
    assert line, "the broadcast's page does not say who it is to"
    return html.unescape(line.group(1)).strip()


@pytest.fixture
def broadcasts(app) -> dict[str, int]:
    weekly = make_list(db.session, 3)
    gone = make_list(db.session, 2, name="Gone", domain="gone.example")
    berlin = segments.create_segment(db.session, "Berlin readers", EVERYONE)
    paris = segments.create_segment(db.session, "Paris readers", EVERYONE)
    made = {
        "list": sent(app, drafts.create_draft(db.session, list_id=weekly.id, subject="To the list")),
        "segment": sent(app, drafts.create_draft(db.session, segment_id=berlin.id,
                                                 subject="To Berlin")),
        "segment deleted": sent(app, drafts.create_draft(db.session, segment_id=paris.id,
                                                         subject="To Paris, once")),
        "list deleted": sent(app, drafts.create_draft(db.session, list_id=gone.id,
                                                      subject="To Gone, once")),
        "draft left without": drafts.create_draft(db.session, segment_id=paris.id,
                                                  subject="Paris draft").id,
    }
    paris_id, gone_id = paris.id, gone.id
    segments.delete_segment(db.session, paris_id)
    delete_list(db.session, gone_id)
    return made


EXPECTED = {
    "list": ("To the list", "Weekly"),
    "segment": ("To Berlin", "segment Berlin readers"),
    "segment deleted": ("To Paris, once", "(segment deleted)"),
    "list deleted": ("To Gone, once", "(list deleted)"),
    "draft left without": ("Paris draft", "(no audience chosen)"),
}


def test_each_broadcast_is_named_by_its_audience_everywhere(broadcasts, logged_in_client):
    dashboard = logged_in_client.get("/").text
    index = logged_in_client.get("/broadcasts/").text
    for kind, (subject, words) in EXPECTED.items():
        assert audience_on_dashboard(dashboard, subject) == words, kind
        assert audience_in_index(index, subject) == words, kind
        if kind != "draft left without":  # a draft opens in the editor, which has its choice
            page = logged_in_client.get(f"/broadcasts/{broadcasts[kind]}").text
            assert audience_on_page(page) == words, kind
    fragment = logged_in_client.get("/dashboard/recent", headers={"HX-Request": "true"}).text
    assert audience_on_dashboard(fragment, "To Berlin") == "segment Berlin readers"
