"""The owner's "reset the hourly count" (System page): forget the sends counted in an
identity's rolling hour, so sending may continue at once. Redis only forgets; the database
keeps every send, and an `hourly_reset` event records who reset what."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from broadside.core.errors import DomainError, NotFound
from broadside.core.events import record_event
from broadside.core.site_settings import get_settings
from broadside.core.timeutil import utcnow
from broadside.delivery.hourly import HourlyCap
from broadside.delivery.identities.service import resolve

log = logging.getLogger("broadside.system")


def reset_hourly_cap(session: Session, redis: Redis, config: Mapping[str, Any],
                     identity_id: int | None = None) -> int:
    """Forget the sends counted in an identity's rolling hour (Redis; None: the default's);
    the database keeps every send.

    Returns how many were forgotten. Records an `hourly_reset` event (and, for the default,
    when: SiteSettings).
    """
    identity = resolve(session, config, identity_id)
    if identity.status == "deleted":
        raise NotFound(f"There is no sending identity {identity_id}.")
    limit = identity.hourly_limit
    if limit <= 0:
        raise DomainError("There is no hourly limit to reset (SEND_HOURLY_LIMIT is 0)."
                          if identity.is_default else f"“{identity.name}” has no hourly cap to reset.")
    cap = HourlyCap(redis, config["BROADSIDE_NAMESPACE"], limit, stream=identity.key)
    try:
        forgotten = cap.used()
        cap.reset()
    except RedisError:
        raise DomainError("Redis is unreachable, so the hourly count cannot be reset now.") from None
    whose = "" if identity.is_default else f" of “{identity.name}”"
    if identity.is_default:
        get_settings(session).hourly_window_reset_at = utcnow()
    record_event(session, "hourly_reset",
                 detail=f"hourly limit{whose} reset by the owner; {forgotten} of {limit} sends forgotten")
    session.commit()
    log.info("hourly cap%s reset by the owner (%d of %d sends forgotten)", whose, forgotten, limit)
    return forgotten
