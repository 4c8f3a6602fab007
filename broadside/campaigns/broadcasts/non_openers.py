"""Send again to those who did not open: who they are (`not_opened_clause`)."""

from __future__ import annotations

from sqlalchemy import and_, exists
from sqlalchemy.sql.elements import ColumnElement

from broadside.core.models import Delivery, PersonActivity, Subscriber
from broadside.core.models.sending import DeliveryStatus


def not_opened_clause(broadcast_id: int) -> ColumnElement[bool]:
    """Correlated on `Subscriber.id`: reached by the broadcast (a copy sent, or perhaps
    delivered) and no per-person open of that copy."""
    return exists().where(
        Delivery.broadcast_id == broadcast_id, Delivery.subscriber_id == Subscriber.id,
        Delivery.status.in_((DeliveryStatus.SENT.value, DeliveryStatus.UNKNOWN.value)),
        ~exists().where(and_(PersonActivity.delivery_id == Delivery.id,
                             PersonActivity.kind == "open")))
