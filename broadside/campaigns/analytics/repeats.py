"""One client hitting one pixel (or one link) again within REPEAT_SECONDS counts once.

A mail program loads the image each time the message is shown, and a reader may click a link
twice; counts only has no person to tell these apart from new readers, so "one client" is what
the hit says of itself: its address and user agent, with what its token says (the broadcast,
the send's 10-second slot, the link's position for a click, and the copy's delivery id only in
per-person mode, where the token names it anyway). Two readers behind one address with the same
mail program, whose copies went out in the same ten seconds, are one client here: counts only
undercounts them rather than name anyone.

What Redis holds: one key per first hit, `<namespace>:analytics:seen:<24 hex>`, the name a keyed
digest (HMAC-SHA256 under a key derived from SECRET_KEY) of the parts above, the value "1", gone
after REPEAT_SECONDS. Neither the address nor the user agent is in it, and without SECRET_KEY the
digest cannot be tried against the few billion addresses there are. Nothing of it reaches the
database or a log line.

Redis down: every hit counts as a first one (the pixel and the redirect answer as ever; a repeat
within the window is then counted once more, as before this check existed).
"""

from __future__ import annotations

import hashlib
import hmac

from redis import Redis
from redis.exceptions import RedisError

REPEAT_SECONDS = 600


class ClientKeys:
    """Redis key names for one client's hits: a keyed digest, so Redis never holds an address."""

    def __init__(self, namespace: str, secret_key: str, purpose: str) -> None:
        self.prefix = f"{namespace}:analytics:{purpose}:"
        self.key = hashlib.sha256(f"broadside.analytics.{purpose}:{secret_key}".encode()).digest()

    def name(self, *parts: object) -> str:
        digest = hmac.new(self.key, "|".join(str(p) for p in parts).encode(), "sha256")
        return self.prefix + digest.hexdigest()[:24]


class Repeats:
    """Whether a hit is this client's first of its pixel or link within the window."""

    def __init__(self, redis: Redis, namespace: str, secret_key: str) -> None:
        self.redis = redis
        self.keys = ClientKeys(namespace, secret_key, "seen")

    def first(self, *, address: str | None, user_agent: str | None, broadcast_id: int, slot: int,
              delivery_id: int | None, position: int | None = None) -> bool:
        """True for a first hit (counted), False for a repeat (answered, not counted).
        `position`: a click's link; None for the pixel."""
        name = self.keys.name("open" if position is None else f"click {position}", address,
                              user_agent, broadcast_id, slot, delivery_id)
        try:
            return bool(self.redis.set(name, "1", nx=True, ex=REPEAT_SECONDS))
        except RedisError:
            return True  # counting goes on without this check: at most a repeat counted again
