"""Send again to those who did not open, over the API (described in
`webapp/apidocs/engagement.py`).

- POST /api/broadcasts/<id>/non_openers {"subject"} -> 201 the new draft (the shape of every
  broadcast answer: `broadcasts.broadcast_json`), to the people the broadcast reached who have
  not opened it; 409 {"error": the reason} when it is not offered (not sent yet, tracking not
  per person, a list counted in aggregate only, the wait not over, already resent); 422 for a
  missing, blank, too long or unchanged subject; 404 for an unknown broadcast.
"""

from __future__ import annotations

from flask import jsonify

from broadside.campaigns.broadcasts import non_openers
from webapp.api import bp, json_body
from webapp.api.broadcasts import broadcast_json
from webapp.api.inputs import only_keys, require_keys
from webapp.extensions import db
from webapp.permissions import allow

FIELDS = ("subject",)


@bp.route("/broadcasts/<int:broadcast_id>/non_openers", methods=["POST"])
@allow("write")
def api_resend_to_non_openers(broadcast_id: int):
    data = json_body()
    only_keys(data, FIELDS)
    require_keys(data, FIELDS)
    draft = non_openers.make_draft(db.session, broadcast_id, data["subject"])
    return jsonify(broadcast_json(draft)), 201
