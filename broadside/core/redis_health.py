"""What to say when Redis does not answer: one sentence for the worker's log, the dashboard's
banner, the send page and `doctor`, naming where we looked (its password masked) and how to
get it running.

Redis holds the queue and each stream's lease, so without it nothing is sent; a self-hoster
who has not started it yet reads "Redis is not answering at redis://127.0.0.1:6379/0: start
it, …" rather than a connection error, and the same words wherever they look.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from broadside.core.logs import mask_query_passwords

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "")
START_LOCAL = ("start it, e.g. `sudo apt-get install redis-server` (Debian/Ubuntu) or "
               "`brew install redis && brew services start redis` (macOS)")
START_REMOTE = "check that Redis runs there and that REDIS_URL names it"


def shown_url(url: str) -> str:
    """REDIS_URL as it may be shown: `user:password@` and `?password=` masked."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "REDIS_URL (unreadable)"
    if password is not None:
        host = parts.netloc.rpartition("@")[2]
        url = urlunsplit(parts._replace(netloc=f"{parts.username or ''}:****@{host}"))
    return mask_query_passwords(url)


def is_local(url: str) -> bool:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    return parts.scheme == "unix" or host in LOCAL_HOSTS


def how_to_start(url: str) -> str:
    """Installing and starting it on this machine, or checking the one REDIS_URL names."""
    return START_LOCAL if is_local(url) else START_REMOTE


def not_answering(url: str) -> str:
    """The sentence: where Redis was not answering, and how to start it."""
    return f"Redis is not answering at {shown_url(url)}: {how_to_start(url)}"
