"""Automations pages (routes on `webapp.automations.bp`, for the signed-in owner)."""

from __future__ import annotations

from flask import render_template

from broadside.automations import service
from webapp.automations import bp
from webapp.extensions import db


@bp.get("/")
def index():
    return render_template("automations/index.html", automations=service.list_automations(db.session))
