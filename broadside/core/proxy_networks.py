"""TRUSTED_PROXIES: the reverse proxies whose X-Forwarded-* headers are believed, by address.

`parse_networks` reads the variable (comma-separated addresses and networks) once at start and
refuses anything else in words; `address_of` reads one address as a proxy writes it in
X-Forwarded-For (a port or brackets around IPv6 allowed). The web side's middleware that uses
them is webapp/proxies.py.
"""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

EXAMPLE = "10.0.0.5, 10.1.0.0/16, fd00::/8"


def parse_networks(text: str) -> tuple[Network, ...]:
    """The networks listed in `text` (an address is a network of one); () for an empty text.
    ValueError, in words naming the entry, for anything that is not an address or network."""
    networks: list[Network] = []
    for entry in (part.strip() for part in (text or "").split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry))
        except ValueError:
            try:
                loose = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"must be comma-separated IP addresses or networks ({EXAMPLE}); "
                                 f"{entry!r} is neither") from None
            raise ValueError(f"lists {entry!r}, which has bits set past its prefix: write the "
                             f"network as {loose}, or the one address without /") from None
    return tuple(networks)


def address_of(text: str | None) -> Address | None:
    """The IP address in `text` as a peer or an X-Forwarded-For entry gives it ("192.0.2.1",
    "192.0.2.1:5678", "2001:db8::1", "[2001:db8::1]:443"; an IPv4-mapped IPv6 address as its
    IPv4 address); None when it is not one ("unknown", a Unix socket's empty peer)."""
    value = (text or "").strip().strip('"')
    if value.startswith("["):
        value = value[1:].partition("]")[0]
    elif value.count(":") == 1:
        value = value.partition(":")[0]
    value = value.split("%", 1)[0]  # no zone index ("fe80::1%eth0")
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_listed(address: Address | None, networks: tuple[Network, ...]) -> bool:
    return address is not None and any(address in network for network in networks)
