"""Which addresses Broadside calls for the owner (broadside.core.public_addresses): every IPv6
wrapper of an IPv4 address is judged by the IPv4 inside, every IANA special-purpose range is
refused, and link-local and metadata addresses are refused even with the own network allowed.
A table of (wrapper x inside address), as a property test would draw them, plus every range."""

from __future__ import annotations

import ipaddress

import pytest

from broadside.core.errors import ValidationError
from broadside.core.public_addresses import ALWAYS, SPECIAL_V4, SPECIAL_V6, is_public, refusal
from broadside.webhooks.addresses import resolve

INSIDE = ["127.0.0.1", "10.1.2.3", "172.16.9.9", "192.168.1.1", "169.254.169.254", "100.64.0.1",
          "0.0.0.0", "192.0.0.170", "198.18.0.1"]
PUBLIC_V4 = ["93.184.216.34", "8.8.8.8", "151.101.1.69"]


def v4(address: str) -> int:
    return int(ipaddress.IPv4Address(address))


# Each wrapper: the IPv6 address that carries the IPv4 one.
WRAPPERS = {
    "IPv4-mapped": lambda a: str(ipaddress.IPv6Address((0xFFFF << 32) | v4(a))),
    "SIIT": lambda a: str(ipaddress.IPv6Address((0xFFFF << 48) | v4(a))),
    "IPv4-compatible": lambda a: str(ipaddress.IPv6Address(v4(a))),
    "NAT64": lambda a: str(ipaddress.IPv6Address((0x64FF9B << 96) | v4(a))),
    "6to4": lambda a: str(ipaddress.IPv6Address((0x2002 << 112) | (v4(a) << 80) | 1)),
    "Teredo client": lambda a: str(ipaddress.IPv6Address(
        (0x20010000 << 96) | (v4("65.54.227.120") << 64) | (~v4(a) & 0xFFFFFFFF))),
    "Teredo server": lambda a: str(ipaddress.IPv6Address(
        (0x20010000 << 96) | (v4(a) << 64) | (~v4("93.184.216.34") & 0xFFFFFFFF))),
}


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("inside", INSIDE)
def test_an_address_inside_any_wrapper_is_refused_like_the_bare_one(wrapper, inside):
    wrapped = WRAPPERS[wrapper](inside)
    assert not is_public(inside)
    found = refusal(wrapped, allow_private=False)
    assert found is not None, f"{wrapped} ({wrapper} of {inside}) was accepted"
    if wrapped != "::":  # IPv4-compatible 0.0.0.0 is the unspecified address itself
        assert inside in found.reason


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("public", PUBLIC_V4)
def test_a_public_address_in_a_wrapper_stays_callable(wrapper, public):
    assert is_public(public)
    assert is_public(WRAPPERS[wrapper](public)), WRAPPERS[wrapper](public)


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_metadata_inside_a_wrapper_is_refused_even_with_the_own_network_allowed(wrapper):
    found = refusal(WRAPPERS[wrapper]("169.254.169.254"), allow_private=True)
    assert found is not None and found.always and "metadata" in found.reason
    assert refusal(WRAPPERS[wrapper]("10.0.0.1"), allow_private=True) is None


@pytest.mark.parametrize("net,words", [*SPECIAL_V4, *SPECIAL_V6], ids=lambda v: str(v))
def test_every_special_purpose_range_is_refused_first_last_and_middle(net, words):
    for ip in (net.network_address, net.broadcast_address, net.network_address + net.num_addresses // 2):
        found = refusal(str(ip), allow_private=False)
        assert found is not None, f"{ip} in {net} ({words}) was accepted"


@pytest.mark.parametrize("address", [
    "192.0.0.9", "192.0.0.10", "192.0.0.171", "2001:1::1", "2001:4:112::1", "2620:4f:8000::1",
    "fec0::1", "fd00::1", "3fff::1", "5f00::1", "64:ff9b:1::a00:1", "100::1", "::", "::1",
    "4000::1", "2001:db8::1", "ff02::1", "255.255.255.255", "224.0.0.1", "240.0.0.1",
])
def test_addresses_the_old_filter_let_through_or_never_listed_are_refused(address):
    assert refusal(address, allow_private=False) is not None


@pytest.mark.parametrize("address", [
    "169.254.169.254", "169.254.0.1", "fe80::1", "fd00:ec2::254", "fd20:ce::254",
    "100.100.100.200", "192.0.0.192", "168.63.129.16", "224.0.0.251", "ff02::fb",
])
def test_link_local_and_metadata_are_refused_even_with_the_own_network_allowed(address):
    found = refusal(address, allow_private=True)
    assert found is not None and found.always


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.8", "192.168.1.1", "::1", "fd00::1",
                                     "::ffff:10.0.0.8", "64:ff9b::7f00:1", "100.64.0.1"])
def test_the_own_network_is_allowed_when_the_owner_says_so(address):
    assert refusal(address, allow_private=True) is None
    assert refusal(address, allow_private=False) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111",
                                     "2a00:1450:4001:80b::200e", "::ffff:93.184.216.34"])
def test_genuinely_public_addresses_are_accepted(address):
    assert is_public(address)


def test_the_always_table_is_a_subset_of_what_is_refused_anyway_or_a_known_host():
    for net, _ in ALWAYS:
        assert refusal(str(net.network_address), allow_private=False) is not None


@pytest.mark.parametrize("host", ["[64:ff9b::7f00:1]", "[::ffff:0:a01:203]", "[::a9fe:a9fe]",
                                  "[2002:7f00:1::1]", "[fec0::1]", "192.0.0.170",
                                  "[2001:0:4136:e378:8000:63bf:80ff:fffe]"])
def test_a_webhook_url_to_a_wrapped_private_address_is_refused_when_saved_and_sent(host):
    # `resolve` is what saving an endpoint and every delivery attempt call (posting.py).
    with pytest.raises(ValidationError, match="WEBHOOKS_ALLOW_PRIVATE|never calls"):
        resolve(f"http://{host}/hook", allow_private=False)


def test_a_public_name_that_resolves_inside_is_refused_at_delivery():
    # localhost is a name, not an address: it is judged by what it resolves to, every one.
    with pytest.raises(ValidationError, match=r"localhost resolves to (127\.0\.0\.1|::1)"):
        resolve("http://localhost:8080/hook", allow_private=False)
    assert resolve("http://localhost:8080/hook", allow_private=True).addresses
