"""Broadcast API: create, send, steer, read, test (the contract is in the README's API section
and held by tests/webapp/test_api_broadcasts.py)."""

from __future__ import annotations

from flask import current_app, jsonify, request
from sqlalchemy import select

from broadside.broadcasts import drafts, service
from broadside.errors import ValidationError
from broadside.models import Delivery, Subscriber
from broadside.models.sending import DELIVERY_STATUSES
from webapp.api import bp, json_body
from webapp.extensions import db, get_jobs
from webapp.params import int_arg


def _state(broadcast) -> dict:
    return {"id": broadcast.id, "status": broadcast.status}


@bp.route("/broadcasts", methods=["POST"])
def create_broadcast():
    data = json_body()
    for key in ("list_id", "subject", "body"):
        if key not in data:
            raise ValidationError(f"'{key}' is required.")
    if not isinstance(data["subject"], str) or not data["subject"].strip():
        raise ValidationError("'subject' must be a non-empty string.")
    broadcast = drafts.create_draft(
        db.session,
        list_id=data["list_id"],
        subject=data["subject"],
        body=data["body"],
        preheader=data.get("preheader", ""),
    )
    return jsonify(_state(broadcast)), 201


@bp.route("/broadcasts/<int:broadcast_id>/send", methods=["POST"])
def send(broadcast_id: int):
    broadcast = service.send_broadcast(
        db.session, broadcast_id, default_from=current_app.config["MAIL_FROM"], jobs=get_jobs()
    )
    return jsonify(_state(broadcast)), 202


@bp.route("/broadcasts/<int:broadcast_id>/pause", methods=["POST"])
def pause(broadcast_id: int):
    return jsonify(_state(service.pause_broadcast(db.session, broadcast_id)))


@bp.route("/broadcasts/<int:broadcast_id>/resume", methods=["POST"])
def resume(broadcast_id: int):
    return jsonify(_state(service.resume_broadcast(db.session, broadcast_id, jobs=get_jobs())))


@bp.route("/broadcasts/<int:broadcast_id>/cancel", methods=["POST"])
def cancel(broadcast_id: int):
    return jsonify(_state(service.cancel_broadcast(db.session, broadcast_id)))


@bp.route("/broadcasts/<int:broadcast_id>")
def show(broadcast_id: int):
    b = service.get_broadcast(db.session, broadcast_id)
    return jsonify(
        {
            **_state(b),
            "pause_reason": b.pause_reason,
            "total": b.total,
            # One counter column per delivery status, in the order of DELIVERY_STATUSES.
            "counts": {status: getattr(b, f"{status}_count") for status in DELIVERY_STATUSES},
        }
    )


@bp.route("/broadcasts/<int:broadcast_id>/deliveries")
def deliveries(broadcast_id: int):
    service.get_broadcast(db.session, broadcast_id)
    status = request.args.get("status")
    if status is not None and status not in DELIVERY_STATUSES:
        raise ValidationError(f"'status' must be one of {', '.join(DELIVERY_STATUSES)}.")
    limit = min(int_arg("limit", 1000, strict=True) or 0, 10_000)
    after = int_arg("after", 0, strict=True) or 0
    query = (
        select(Delivery.id, Subscriber.email, Delivery.status, Delivery.reason, Delivery.attempts)
        .outerjoin(Subscriber, Subscriber.id == Delivery.subscriber_id)
        .where(Delivery.broadcast_id == broadcast_id, Delivery.id > after)
        .order_by(Delivery.id)
        .limit(max(limit, 1))
    )
    if status:
        query = query.where(Delivery.status == status)
    return jsonify(
        [
            {"email": email, "status": st, "reason": reason, "attempts": attempts}
            for _id, email, st, reason, attempts in db.session.execute(query)
        ]
    )


@bp.route("/broadcasts/<int:broadcast_id>/test", methods=["POST"])
def test_send(broadcast_id: int):
    data = json_body()
    if not isinstance(data.get("email"), str):
        raise ValidationError("'email' is required.")
    service.send_test(
        db.session, broadcast_id, data["email"], default_from=current_app.config["MAIL_FROM"], jobs=get_jobs()
    )
    return jsonify({"id": broadcast_id, "test_to": data["email"].strip().lower()}), 202
