"""The dashboard home: recent broadcasts, lists, and whether sending can happen at all."""

from __future__ import annotations

from flask import Blueprint, render_template

from webapp.dashboard.status import sending_status
from webapp.extensions import db

bp = Blueprint("dashboard", __name__)


@bp.route("/")
def home():
    from sqlalchemy import select

    from webapp.models import Broadcast, MailingList

    broadcasts = db.session.scalars(
        select(Broadcast).order_by(Broadcast.created_at.desc()).limit(10)
    ).all()
    lists = db.session.scalars(select(MailingList).order_by(MailingList.name)).all()
    return render_template(
        "dashboard/home.html", broadcasts=broadcasts, lists=lists, status=sending_status()
    )
