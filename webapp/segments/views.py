"""Segments pages (routes on `webapp.segments.bp`)."""

from __future__ import annotations

from flask import render_template

from broadside.segments.service import all_segments
from webapp.extensions import db
from webapp.segments import bp


@bp.route("/")
def index():
    return render_template("segments/index.html", segments=all_segments(db.session))
