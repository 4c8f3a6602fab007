"""What looks like a machine rather than a reader, counted apart (never dropped): opens and
clicks are an estimate, and the page says so.

Signals, each cheap and documented here:
- the user agent of a known link scanner or preview fetcher (`SCANNER_AGENTS`), or none;
- an address in a network that fetches mail on the reader's behalf before anyone reads it
  (`MACHINE_NETWORKS`): Apple Mail Privacy Protection loads every image through Apple's proxies
  (17.0.0.0/8) when the message arrives, and Microsoft's Exchange Online Protection follows
  links from its own ranges (Safe Links);
- a hit within seconds of the message being sent (`EARLY_SECONDS`, against the 10-second slot
  the token carries): no reader opens that fast, a gateway scanning on delivery does;
- a prefetch: one client following several links of one message within a second
  (`Bursts`): every click of the burst counts as a bot's, the first one moved there too.

The address and user agent are read from the request and dropped: never stored, never logged.
A burst is recognised through one Redis key that lives one second, named by a keyed digest
(SECRET_KEY) of client, broadcast and slot, so even Redis never holds an address.
"""

from __future__ import annotations

from ipaddress import ip_address, ip_network

from redis import Redis
from redis.exceptions import RedisError

from broadside.campaigns.analytics.repeats import ClientKeys
from broadside.campaigns.analytics.tokens import SLOT_SECONDS

EARLY_SECONDS = 5  # after the end of the send's slot: 5 to 15 s after the message was sent
BURST_MS = 1000

SCANNER_AGENTS = (
    "bot", "spider", "crawler", "preview", "scanner", "barracuda", "proofpoint", "mimecast",
    "messagelabs", "symantec", "forcepoint", "fireeye", "trendmicro", "trend micro", "sophos",
    "ironport", "cisco", "safelinks", "checkpoint", "zscaler", "python-requests", "python-urllib",
    "curl/", "wget/", "go-http-client", "okhttp", "java/", "libwww", "headlesschrome",
    "phantomjs", "facebookexternalhit", "slackbot", "whatsapp", "skypeuripreview",
)
MACHINE_NETWORKS = (
    (ip_network("17.0.0.0/8"), "Apple Mail Privacy Protection"),
    (ip_network("40.92.0.0/15"), "Microsoft Exchange Online Protection"),
    (ip_network("40.107.0.0/16"), "Microsoft Exchange Online Protection"),
    (ip_network("52.100.0.0/14"), "Microsoft Exchange Online Protection"),
    (ip_network("104.47.0.0/17"), "Microsoft Exchange Online Protection"),
)


def suspected(*, user_agent: str | None, address: str | None, slot: int, now: float) -> str | None:
    """Why this hit looks like a machine, or None for a reader (as far as anyone can tell)."""
    agent = (user_agent or "").strip().lower()
    if not agent:
        return "no user agent"
    for word in SCANNER_AGENTS:
        if word in agent:
            return "a link scanner's user agent"
    if address:
        try:
            where = ip_address(address)
        except ValueError:
            where = None
        if where is not None:
            for network, name in MACHINE_NETWORKS:
                if where.version == network.version and where in network:
                    return name
    if now - (slot + 1) * SLOT_SECONDS < EARLY_SECONDS:
        return "within seconds of delivery"
    return None


class Bursts:
    """Several links of one message from one client within a second: a prefetch."""

    def __init__(self, redis: Redis, namespace: str, secret_key: str) -> None:
        self.redis = redis
        self.keys = ClientKeys(namespace, secret_key, "burst")

    def click(self, *, address: str | None, user_agent: str | None, broadcast_id: int, slot: int,
              delivery_id: int | None, position: int, human: bool) -> tuple[bool, int | None]:
        """(is this click part of a burst, the position of the burst's first click when it was
        counted as a reader's and must now move to the bots). `human`: this click passed the
        other signals (a first click taken for a machine already is not moved again)."""
        name = self.keys.name(address, user_agent, broadcast_id, slot, delivery_id)
        try:
            if self.redis.set(name, str(position) if human else "-", nx=True, px=BURST_MS):
                return False, None
            first = self.redis.set(name, "-", keepttl=True, get=True)
        except RedisError:
            return False, None  # counting goes on without this one signal
        if first is None:  # expired between the two calls: a new window
            return False, None
        text = first.decode() if isinstance(first, bytes) else str(first)
        return True, int(text) if text.isdigit() else None
