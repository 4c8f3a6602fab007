"""One ceiling per provider account, across every stream and worker process (invariant 2's
other half: the pace is each identity's own floor, this is the account's ceiling above them).

Identities that send through the same provider account (`transport_urls.account_of`: the same
SMTP host and user, SES access key and region, Postmark server token, Resend or Mailgun key)
share the provider's one limit. Two streams each keeping to a limit make twice the limit at
the provider, so the ceiling lives in Redis, where every stream of every worker meets it.

Guarantees, and why:

- **At most `n` request starts in any window of `n / rate` seconds (plus MARGIN_S), and
  starts spaced by at least `1 / rate`**, decided by one Lua script per request start
  (`EVALSHA`, atomic): a sliding window of start times in a ZSET per account, timed by
  Redis' own clock (`TIME`), so workers on machines whose clocks differ still share one view.
  `n` is the rate rounded down (at least 1): at 10/s, one start every 100 ms and never 11 in
  1.05 s; at 0.5/s, one in any 2.05 s. Not a token bucket: a bucket of `n` tokens refilled
  at `rate` lets `n` go in the same millisecond and `n` more within that second, twice the
  limit in a window a provider that counts per second sees. The spacing keeps the sends
  even (no burst at a window's start); the window's margin holds the count at the provider
  when the time between a grant and the request's arrival varies by up to MARGIN_S (50 ms:
  on a loaded 2-core machine 20 ms was seen to be too little, an 11th message arriving
  inside one second at a loopback server).
- **Called right before each request, after the identity's own pace** (jobs.runtime's
  `LeasedPacer.wait`, which the transport calls right before MAIL FROM or the HTTP
  request): a recipient skipped at send time takes no slot.
- **The account's key in Redis is an HMAC** (the installation's SECRET_KEY, its own derived
  key) of the provider kind and credentials, never the credentials themselves.
- **A provider's word holds the whole account** (`hold`): a 429's Retry-After, or a
  response saying no budget remains until a reset (`budget_wait`), is written beside the
  window, so every stream of the account waits until then, not only the one that heard it.
- **Redis not answering never sends faster** (`Ceiling.wait`): the caller waits and asks
  again, because sending on without the shared count is exactly the doubled rate this module
  exists to prevent; a stream whose Redis is gone cannot renew its lease either, so it stops
  soon in any case. A stop asked for meanwhile ends the wait with `CeilingStopped`.
- **SES caps itself**: the account's `MaxSendRate` (sesv2 `GetAccount`), read when the
  identity is checked and hourly by the worker, is kept here (`record_ses_max_rate`), and the
  effective rate is never above SES_SHARE of it (`effective_rate`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping

from redis import Redis
from redis.exceptions import RedisError

from broadside.core.transport_urls import account_of

log = logging.getLogger("broadside.worker")

ACCOUNT_KEY = "account"
MARGIN_S = 0.05  # at 10/s: 10 starts in 1.05 s, 5 % of the rate (see the docstring)
KEEP_S = 10.0  # start times kept this long: the achieved rate is read over them
SES_SHARE = 0.9
SES_RATE_TTL_S = 3 * 3600  # read hourly; a value this old is no longer trusted
MAX_HOLD_S = 3600.0
REDIS_RETRY_S = 0.5

# KEYS[1] the window (ZSET of start times, µs), KEYS[2] the hold (µs, a provider's word).
# ARGV: n, window µs, a member prefix, "1" to take a slot ("0" to look only), keep µs,
# spacing µs (the least time between two starts).
# Returns {µs to wait (0: a slot is free, and taken when asked), slots left after this one}.
SLIDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local hold = tonumber(redis.call('GET', KEYS[2]) or '0')
if hold > now then return {hold - now, 0} end
local n = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[5]))
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] and tonumber(last[2]) + tonumber(ARGV[6]) > now then
  return {tonumber(last[2]) + tonumber(ARGV[6]) - now, 0}
end
local used = redis.call('ZCOUNT', KEYS[1], now - w, '+inf')
if used >= n then
  local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], now - w, '+inf', 'WITHSCORES', 'LIMIT', used - n, 1)
  return {math.max(1, tonumber(oldest[2]) + w - now + 1), 0}
end
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[1], now, ARGV[3] .. now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[5]) / 1000) + 1000)
  return {0, n - used - 1}
end
return {0, n - used}
"""

# KEYS[1] the hold; ARGV[1] seconds (µs) from Redis' now. Keeps the later of the two.
HOLD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local until_ = now + tonumber(ARGV[1])
local held = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ > held then
  redis.call('SET', KEYS[1], string.format('%d', until_), 'PX', math.ceil(tonumber(ARGV[1]) / 1000) + 1000)
end
return 1
"""


class CeilingStopped(Exception):
    """The stream was asked to stop while the account's ceiling held its next request: nothing
    was sent."""


def account_digest(transport_url: str, secret_key: str) -> str | None:
    """The account's name in Redis: an HMAC of its kind and credentials under a key derived
    from SECRET_KEY for this purpose alone (None: the outbox, no account)."""
    account = account_of(transport_url)
    if account is None:
        return None
    derived = hmac.new(secret_key.encode(), b"broadside account ceiling", hashlib.sha256).digest()
    return hmac.new(derived, "\x00".join(account).encode(), hashlib.sha256).hexdigest()[:32]


def _key(namespace: str, digest: str, part: str = "") -> str:
    return f"{namespace}:{ACCOUNT_KEY}:{digest}" + (f":{part}" if part else "")


def effective_rate(account_rate: float | None, ses_max_rate: float | None) -> float | None:
    """The ceiling in requests per second: the owner's account_rate, never above SES_SHARE of
    SES's MaxSendRate when that is known (None: no ceiling)."""
    cap = SES_SHARE * ses_max_rate if ses_max_rate and ses_max_rate > 0 else None
    if account_rate is None:
        return cap
    return account_rate if cap is None else min(account_rate, cap)


def window_of(rate: float) -> tuple[int, float]:
    """(n, seconds): at most n starts in any window of that many seconds (margin included)."""
    n = max(1, int(rate))
    return n, n / rate + MARGIN_S


def record_ses_max_rate(redis: Redis, namespace: str, digest: str, max_send_rate: float) -> None:
    redis.set(_key(namespace, digest, "ses_max_rate"), f"{max_send_rate:g}", ex=SES_RATE_TTL_S)


def ses_max_rate(redis: Redis, namespace: str, digest: str) -> float | None:
    raw = redis.get(_key(namespace, digest, "ses_max_rate"))
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def achieved_rate(redis: Redis, namespace: str, digest: str, over: float = KEEP_S) -> float:
    """Request starts per second across the account over the last `over` seconds."""
    seconds, micros = redis.time()
    now = seconds * 1_000_000 + micros
    started = redis.zcount(_key(namespace, digest), now - int(over * 1_000_000), "+inf")
    return int(started) / over


def hold(redis: Redis, namespace: str, digest: str, seconds: float) -> None:
    """No request of the account before `seconds` from now (the later hold wins)."""
    wait = max(0.0, min(seconds, MAX_HOLD_S))
    if wait > 0:
        redis.eval(HOLD, 1, _key(namespace, digest, "hold"), str(int(wait * 1_000_000)))


def held_for(redis: Redis, namespace: str, digest: str) -> float:
    """Seconds the provider's word still holds the account (0: none)."""
    raw = redis.get(_key(namespace, digest, "hold"))
    if raw is None:
        return 0.0
    seconds, micros = redis.time()
    return max(0.0, (int(raw) - (seconds * 1_000_000 + micros)) / 1_000_000)


class Ceiling:
    """One stream's handle on its account's ceiling. `rate` may change while it runs (the
    SES cap read again): the next request uses the new one. With no rate (None) only the
    account's holds apply (a GET per request instead of the script) and its starts are not
    counted."""

    def __init__(self, redis: Redis, namespace: str, digest: str, rate: float | None,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.redis = redis
        self.namespace = namespace
        self.digest = digest
        self.rate = rate
        self.window_key = _key(namespace, digest)
        self.hold_key = _key(namespace, digest, "hold")
        self._member = uuid.uuid4().hex[:8] + ":"
        self._script = redis.register_script(SLIDE)
        self._sleep = sleep
        self.slots_left = 0  # what the last answer said: 0, ask before starting
        self.waited_seconds = 0.0
        self._said_down = False

    def ask(self, take: bool) -> float:
        """Seconds to wait before the next request may start (0: it may now, and with `take`
        its slot is taken). Raises RedisError."""
        if self.rate is None:
            return self._held()
        n, window = window_of(self.rate)
        spacing = int(1_000_000 / self.rate)
        wait, left = self._script(keys=[self.window_key, self.hold_key], args=[
            n, int(window * 1_000_000), self._member, "1" if take else "0", int(KEEP_S * 1_000_000),
            spacing])
        self.slots_left = int(left) if int(wait) == 0 else 0
        return int(wait) / 1_000_000

    def wait(self, stop: threading.Event | None = None, *, take: bool = True,
             lead: float = 0.0) -> None:
        """Return once a request may start (its slot taken with `take`); otherwise sleep until
        `lead` seconds before one may. Redis not answering: wait and ask again (see the
        module's docstring). Raises CeilingStopped when `stop` is set while waiting."""
        while True:
            try:
                wait = self.ask(take)
            except RedisError as exc:
                if not self._said_down:
                    self._said_down = True
                    log.warning("the account ceiling cannot be read (%s); holding requests until "
                                "Redis answers", exc)
                wait = REDIS_RETRY_S
            else:
                self._said_down = False
                if wait <= lead:
                    return
                wait -= lead
            if stop is not None and stop.is_set():
                raise CeilingStopped("the worker stopped while the account's ceiling held the request")
            self.waited_seconds += wait
            if self._sleep is not None:
                self._sleep(wait)
            elif stop is not None:
                stop.wait(wait)
            else:
                time.sleep(wait)

    def _held(self) -> float:
        """No rate: only a provider's hold on the account counts (one GET, not the script)."""
        self.slots_left = 1
        return held_for(self.redis, self.namespace, self.digest)

    def hold(self, seconds: float) -> None:
        hold(self.redis, self.namespace, self.digest, seconds)


def budget_wait(headers: Mapping[str, str]) -> float | None:
    """Seconds until a provider's budget resets when its answer says none remains
    (`ratelimit-remaining: 0` with `ratelimit-reset: <seconds>`, the IETF draft headers Resend
    sends on every answer); None when it says nothing of the kind."""
    remaining, reset = _header(headers, "ratelimit-remaining"), _header(headers, "ratelimit-reset")
    if remaining is None or reset is None:
        return None
    try:
        left, seconds = float(remaining), float(reset)
    except ValueError:
        return None
    if left > 0 or not 0 < seconds <= MAX_HOLD_S:
        return None
    return seconds


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value.strip() if isinstance(value, str) else None
