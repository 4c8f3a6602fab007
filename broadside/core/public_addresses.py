"""Which IP addresses Broadside may call for the owner: outgoing webhooks and a provider
transport's `?endpoint=`. No request reaches inside the owner's network, or a cloud's metadata
service, through an address the owner (or whoever can edit a URL) typed.

`refusal(address, allow_private=…)` judges one address:

- An IPv6 address that wraps an IPv4 one is judged by the IPv4 inside it: IPv4-mapped
  (`::ffff:a.b.c.d`), SIIT (`::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64
  (`64:ff9b::a.b.c.d`), 6to4 (`2002:AABB:CCDD::`) and Teredo (`2001:0:SERVER:…:~CLIENT`, both
  the server and the obfuscated client address). A wrapped private address is as private as
  the bare one.
- Every range of IANA's special-purpose registries (IPv4 and IPv6, `SPECIAL_V4`/`SPECIAL_V6`
  below, each with its RFC), multicast, deprecated site-local `fec0::/10`, and any IPv6 address
  outside global unicast `2000::/3`, is refused: none of them is a public server's address.
- `ALWAYS` (link-local, the clouds' metadata services, multicast, broadcast) is refused even
  when the owner allows the own network (`allow_private=True`, from `WEBHOOKS_ALLOW_PRIVATE`
  or `PROVIDER_ENDPOINTS_ALLOW_PRIVATE`): nothing Broadside calls lives there, and a metadata
  service hands out the machine's cloud credentials.

`resolve_host` resolves a name (every address it has); `first_refusal` judges them all: a public
name that points inside (one of its addresses is enough) is refused like the address itself.
Callers connect to an address they checked, never to the name resolved again.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Net = ipaddress.IPv4Network | ipaddress.IPv6Network


def _nets(*rows: tuple[str, str]) -> tuple[tuple[Net, str], ...]:
    return tuple((ipaddress.ip_network(net), words) for net, words in rows)


# IANA IPv4 Special-Purpose Address Registry (iana-ipv4-special-registry), most specific first.
SPECIAL_V4 = _nets(
    ("0.0.0.0/8", "“this network”, RFC 791"),  # 0.0.0.0 connects to the local host on Linux
    ("10.0.0.0/8", "a private network, RFC 1918"),
    ("100.64.0.0/10", "carrier-grade NAT shared space, RFC 6598"),
    ("127.0.0.0/8", "loopback, RFC 1122"),
    ("169.254.0.0/16", "link-local, RFC 3927"),
    ("172.16.0.0/12", "a private network, RFC 1918"),
    # 192.0.0.0/24 as a whole: DS-Lite 192.0.0.0/29 (RFC 7335), the dummy address 192.0.0.8
    # (RFC 7600), PCP and TURN anycast 192.0.0.9-10 (RFC 7723, 8155), NAT64 discovery
    # 192.0.0.170-171 (RFC 7050), and what the IETF assigns next.
    ("192.0.0.0/24", "IETF protocol assignments, RFC 6890"),
    ("192.0.2.0/24", "documentation (TEST-NET-1), RFC 5737"),
    ("192.31.196.0/24", "AS112 DNS sink, RFC 7535"),
    ("192.52.193.0/24", "AMT relay anycast, RFC 7450"),
    ("192.88.99.0/24", "the deprecated 6to4 relay anycast, RFC 7526"),
    ("192.168.0.0/16", "a private network, RFC 1918"),
    ("192.175.48.0/24", "AS112 direct delegation, RFC 7534"),
    ("198.18.0.0/15", "benchmarking, RFC 2544"),
    ("198.51.100.0/24", "documentation (TEST-NET-2), RFC 5737"),
    ("203.0.113.0/24", "documentation (TEST-NET-3), RFC 5737"),
    ("224.0.0.0/4", "multicast, RFC 5771"),  # the address-space registry, not a server's
    ("255.255.255.255/32", "the limited broadcast address, RFC 919"),
    ("240.0.0.0/4", "reserved, RFC 1112"),
)

# IANA IPv6 Special-Purpose Address Registry (iana-ipv6-special-registry), plus what RFC 4291's
# address space keeps out of global unicast. The wrappers (mapped, SIIT, compatible, NAT64
# 64:ff9b::/96, 6to4, Teredo) are unwrapped before this table is read (`_embedded`).
SPECIAL_V6 = _nets(
    ("::/128", "the unspecified address, RFC 4291"),
    ("::1/128", "loopback, RFC 4291"),
    ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation, RFC 8215"),  # a translator of one's own
    ("100::/64", "discard-only, RFC 6666"),
    ("100:0:0:1::/64", "the dummy IPv6 prefix, RFC 9780"),
    # 2001::/23 as a whole: benchmarking 2001:2::/48 (RFC 5180), AMT 2001:3::/32 (RFC 7450),
    # AS112 2001:4:112::/48 (RFC 7535), ORCHID 2001:10::/28 and ORCHIDv2 2001:20::/28
    # (RFC 7343), drone remote ID 2001:30::/28 (RFC 9374), anycast 2001:1::1-3; Teredo
    # 2001::/32 is unwrapped first.
    ("2001::/23", "IETF protocol assignments, RFC 2928"),
    ("2001:db8::/32", "documentation, RFC 3849"),
    ("2620:4f:8000::/48", "AS112 direct delegation, RFC 7534"),
    ("3fff::/20", "documentation, RFC 9637"),
    ("5f00::/16", "segment routing SIDs, RFC 9602"),
    ("fc00::/7", "a unique local (private) network, RFC 4193"),
    ("fe80::/10", "link-local, RFC 4291"),
    ("fec0::/10", "site-local (deprecated, private), RFC 3879"),
    ("ff00::/8", "multicast, RFC 4291"),
)
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")  # RFC 4291: everything else is reserved

# Refused even when the owner allows the own network: no server of theirs lives here.
ALWAYS = _nets(
    ("169.254.169.254/32", "a cloud metadata service (AWS, GCP, Azure, OpenStack…)"),
    ("fd00:ec2::254/128", "the AWS metadata service (IPv6)"),
    ("fd20:ce::254/128", "the Google Cloud metadata service (IPv6)"),
    ("100.100.100.200/32", "the Alibaba Cloud metadata service"),
    ("192.0.0.192/32", "the Oracle Cloud metadata service"),
    ("168.63.129.16/32", "the Azure host service (WireServer)"),
    ("169.254.0.0/16", "link-local, RFC 3927"),
    ("fe80::/10", "link-local, RFC 4291"),
    ("224.0.0.0/4", "multicast, RFC 5771"),
    ("ff00::/8", "multicast, RFC 4291"),
    ("255.255.255.255/32", "the limited broadcast address, RFC 919"),
)

_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_SIIT = ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")


@dataclass(frozen=True)
class Refusal:
    address: str  # as resolved or written
    reason: str  # what the address is, in words, with its RFC
    always: bool  # refused even with the own network allowed


def _low32(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def _embedded(ip: ipaddress.IPv6Address) -> list[tuple[ipaddress.IPv4Address, str]]:
    """The IPv4 addresses an IPv6 address carries, each with the wrapper's name ([] for none)."""
    if ip in _MAPPED:
        return [(_low32(ip), "IPv4-mapped ::ffff:0:0/96")]
    if ip in _SIIT:
        return [(_low32(ip), "SIIT ::ffff:0:0:0/96")]
    if ip in _COMPATIBLE and int(ip) > 1:  # :: and ::1 are themselves
        return [(_low32(ip), "IPv4-compatible ::/96")]
    if ip in _NAT64:
        return [(_low32(ip), "NAT64 64:ff9b::/96")]
    if ip in _SIX_TO_FOUR:
        return [(ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF), "6to4 2002::/16")]
    if ip in _TEREDO:
        server = ipaddress.IPv4Address((int(ip) >> 64) & 0xFFFFFFFF)
        client = ipaddress.IPv4Address(~int(ip) & 0xFFFFFFFF)  # stored inverted (RFC 4380)
        return [(client, "Teredo 2001::/32 (client)"), (server, "Teredo 2001::/32 (server)")]
    return []


def _table_refusal(ip: IP, allow_private: bool) -> tuple[str, bool] | None:
    for net, words in ALWAYS:
        if ip.version == net.version and ip in net:
            return words, True
    if allow_private:
        return None
    for net, words in SPECIAL_V4 if ip.version == 4 else SPECIAL_V6:
        if ip in net:
            return words, False
    if ip.version == 6 and ip not in GLOBAL_UNICAST_V6:
        return "outside IPv6 global unicast 2000::/3, RFC 4291", False
    return None


def refusal(address: str, *, allow_private: bool) -> Refusal | None:
    """Why Broadside will not call this address, or None when it may. A string that is not an
    IP address at all is refused (the callers give resolved addresses)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return Refusal(address, "not an IP address", True)
    if isinstance(ip, ipaddress.IPv6Address):
        wrapped = _embedded(ip)
        if wrapped:
            for inner, wrapper in wrapped:
                found = _table_refusal(inner, allow_private)
                if found:
                    return Refusal(address, f"{inner} inside {wrapper}: {found[0]}", found[1])
            return None
    found = _table_refusal(ip, allow_private)
    return Refusal(address, found[0], found[1]) if found else None


def is_public(address: str) -> bool:
    return refusal(address, allow_private=False) is None


class Unresolvable(ValueError):
    """The name has no address (or is no valid name)."""


def resolve_host(host: str, port: int) -> tuple[str, ...]:
    """Every address the name resolves to, in the resolver's order (a literal IP: itself)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError):  # ValueError: UnicodeError, a name too long
        raise Unresolvable(host) from None
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise Unresolvable(host)
    return addresses


def first_refusal(addresses: tuple[str, ...] | list[str], *, allow_private: bool) -> Refusal | None:
    """The first address refused (those refused always come first), or None when all may be called."""
    refused = [r for r in (refusal(a, allow_private=allow_private) for a in addresses) if r]
    refused.sort(key=lambda r: not r.always)
    return refused[0] if refused else None


def refusal_words(host: str, found: Refusal, flag: str) -> str:
    """The owner's words for a refused host (the caller puts "The host " or the like before
    them): what it resolves to, what that is, and the flag."""
    where = f"{host} resolves to {found.address} ({found.reason})"
    if found.always:
        return (f"{where}: Broadside never calls link-local or cloud metadata addresses, not "
                f"even with {flag}=1.")
    return (f"{where}: Broadside only calls public addresses, never private, loopback or "
            f"link-local ones or those reserved for special purposes (set {flag}=1 to allow "
            "your own network).")
