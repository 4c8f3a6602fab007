"""Enough of SPF (RFC 7208) to answer "does this domain's SPF authorise these senders?".

`evaluate` reads the domain's `v=spf1` record and follows it as a receiver would: `ip4`/`ip6`
(with prefixes), `a` and `mx` (their names resolved, up to 10 MX names), `include:` (a match
when the included record passes) and `redirect=` (when nothing matched), with the limit of 10
DNS-querying terms of RFC 7208 §4.6.4 (past it: permerror). `exists`, `ptr` and macros are
counted as lookups but never match: a record relying on them is judged without them.

A provider is "authorised" when the walk reaches its documented `include:` domain with a `+`
qualifier (its addresses change; naming its include is what the provider asks for), so
`trusted` takes those domains.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from broadside.delivery.dns_checks.lookups import Lookups

LOOKUP_LIMIT = 10
MAX_MX_NAMES = 10
COUNTED = ("include", "a", "mx", "ptr", "exists")


@dataclass
class Verdict:
    result: str  # pass, fail, softfail, neutral, none, permerror
    record: str = ""  # the domain's own v=spf1 record, as published ("" when none)
    matched: str = ""  # the term that decided, when one did
    problem: str = ""  # why permerror, in words
    lookups: int = 0


@dataclass
class _Walk:
    lookups: Lookups
    senders: list[ipaddress.IPv4Address | ipaddress.IPv6Address]
    trusted: frozenset[str]
    count: int = 0
    seen: set[str] = field(default_factory=set)


class _PermError(Exception):
    pass


def spf_records(lookups: Lookups, domain: str) -> list[str]:
    return [t for t in lookups.txt(domain) if t.lower() == "v=spf1" or t.lower().startswith("v=spf1 ")]


def evaluate(lookups: Lookups, domain: str, senders: list[str],
             trusted: frozenset[str] = frozenset()) -> Verdict:
    """SPF's answer for mail from `senders` (IP addresses) with a Return-Path at `domain`.
    Raises CouldNotAsk when the resolver does not answer."""
    walk = _Walk(lookups, [ipaddress.ip_address(s) for s in senders], trusted)
    records = spf_records(lookups, domain)
    own = records[0] if len(records) == 1 else ""
    try:
        result, matched = _check(walk, domain, top=True)
    except _PermError as exc:
        return Verdict("permerror", own, problem=str(exc), lookups=walk.count)
    return Verdict(result, own, matched, lookups=walk.count)


QUALIFIERS = {"+": "pass", "-": "fail", "~": "softfail", "?": "neutral"}


def _count(walk: _Walk) -> None:
    walk.count += 1
    if walk.count > LOOKUP_LIMIT:
        raise _PermError(f"it needs more than {LOOKUP_LIMIT} DNS lookups (RFC 7208 §4.6.4), "
                         "so receivers treat it as an error")


def _check(walk: _Walk, domain: str, *, top: bool = False) -> tuple[str, str]:
    domain = domain.rstrip(".").lower()
    if domain in walk.seen:
        raise _PermError(f"{domain}'s SPF includes itself")
    walk.seen.add(domain)
    records = spf_records(walk.lookups, domain)
    if not records:
        if top:
            return "none", ""
        raise _PermError(f"{domain} has no SPF record, yet it is included or redirected to")
    if len(records) > 1:
        raise _PermError(f"{domain} publishes {len(records)} SPF records; there must be one")
    redirect = ""
    for term in records[0].split()[1:]:
        lowered = term.lower()
        if lowered.startswith("redirect="):
            redirect = term.split("=", 1)[1]
            continue
        if "=" in lowered.split(":", 1)[0]:
            continue  # another modifier (exp=…): no bearing on the result
        qualifier = QUALIFIERS.get(term[0])
        body = term[1:] if qualifier else term
        if "%" in body:
            if body.split(":", 1)[0].split("/", 1)[0].lower() in COUNTED:
                _count(walk)
            continue  # macros are not expanded here
        if _matches(walk, domain, body):
            return qualifier or "pass", term
    if redirect:
        _count(walk)
        walk.seen.discard(domain)
        return _check(walk, redirect)
    return "neutral", ""


def _split(body: str) -> tuple[str, str, str]:
    """mechanism, its domain argument, its prefix length ("" each when absent)."""
    name, _, rest = body.partition(":")
    if not rest and "/" in name:
        name, _, prefix = name.partition("/")
        return name.lower(), "", "/" + prefix if prefix.startswith("/") else prefix
    arg, _, prefix = rest.partition("/")
    return name.lower(), arg, prefix


def _in(walk: _Walk, addresses: list[str], prefix: str) -> bool:
    v4_bits, _, v6_bits = prefix.partition("//")
    for text in addresses:
        address = ipaddress.ip_address(text)
        bits = v4_bits if address.version == 4 else v6_bits
        try:
            network = ipaddress.ip_network(f"{address}/{bits or address.max_prefixlen}", strict=False)
        except ValueError:
            raise _PermError(f"an SPF term has a malformed prefix length (/{prefix})") from None
        if any(s.version == address.version and s in network for s in walk.senders):
            return True
    return False


def _matches(walk: _Walk, domain: str, body: str) -> bool:
    name, arg, prefix = _split(body)
    if name == "all":
        return True
    if name in ("ip4", "ip6"):
        try:
            network = ipaddress.ip_network(arg + (f"/{prefix}" if prefix else ""), strict=False)
        except ValueError:
            raise _PermError(f"{domain}'s SPF has a malformed {name}: term ({body})") from None
        return any(s.version == network.version and s in network for s in walk.senders)
    if name in COUNTED:
        _count(walk)
    if name == "include":
        if not arg:
            raise _PermError(f"{domain}'s SPF has an include without a domain")
        if arg.rstrip(".").lower() in walk.trusted:
            return True
        result, _ = _check(walk, arg)
        walk.seen.discard(arg.rstrip(".").lower())
        return result == "pass"
    if name == "a":
        return _in(walk, walk.lookups.addresses(arg or domain), prefix)
    if name == "mx":
        exchanges = walk.lookups.mx(arg or domain)[:MAX_MX_NAMES]
        return any(_in(walk, walk.lookups.addresses(host), prefix) for _, host in exchanges)
    if name in ("ptr", "exists"):
        return False
    raise _PermError(f"{domain}'s SPF has a term receivers do not know: {body}")
