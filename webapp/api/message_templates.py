"""Templates over the API (described in `webapp/apidocs/message_templates.py`): read-only.

- GET /api/templates -> 200 {"items": [Template]}: the three built-ins (their id is their key,
  a string: "newsletter", "announcement", "letter"), then the owner's (a number), by name.
- GET /api/templates/{id} -> 200 Template, with its body.
"""

from __future__ import annotations

from typing import Any

from flask import jsonify

from broadside.campaigns.content import templates
from broadside.campaigns.content.design import design_changes
from webapp.api import bp
from webapp.api.inputs import iso
from webapp.extensions import db


def template_json(t: templates.Template, *, with_body: bool = False) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "id": t.id, "name": t.name, "description": t.description, "built_in": t.built_in,
        "subject": t.subject, "preheader": t.preheader, "format": t.body_format,
        "editor": t.editor, "design": design_changes(t.design_overrides) or None,
        "created_at": iso(t.created_at), "updated_at": iso(t.updated_at)}
    if with_body:
        shown["body"] = t.body
    return shown


@bp.route("/templates")
def list_templates():
    return jsonify({"items": [template_json(t) for t in templates.all_templates(db.session)]})


@bp.route("/templates/<template_id>")
def get_template(template_id: str):
    return jsonify(template_json(templates.find_template(db.session, template_id),
                                 with_body=True))
