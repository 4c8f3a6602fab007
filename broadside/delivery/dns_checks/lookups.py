"""The DNS questions of the checks, asked through one resolver within one time budget.

`Lookups` wraps dnspython: the resolver is DNS_RESOLVER ("host:port", the test suite's server on
loopback) or, when that is empty, the system's (/etc/resolv.conf). Each question gives up after
at most `PER_LOOKUP_S`, and all the questions of one identity's check share `BUDGET_S` and
`MAX_QUERIES`, so a resolver that does not answer costs a page a few seconds, never more.

A name that does not exist, or has no record of the type asked, is an empty answer (that is a
finding: "missing"). A resolver that does not answer in time, refuses, or cannot be configured
raises `CouldNotAsk`, whose message names the resolver: the check then says "could not ask", it
never raises past its caller.
"""

from __future__ import annotations

import ipaddress
import time

import dns.exception
import dns.name
import dns.rdatatype
import dns.resolver

from broadside.core.config import parse_resolver

PER_LOOKUP_S = 2.0
BUDGET_S = 8.0
MAX_QUERIES = 40


class CouldNotAsk(Exception):
    """The resolver gave no usable answer; the message says which resolver and what happened."""


class Lookups:
    """One identity's questions: TXT, MX and addresses, each bounded, all within a budget."""

    def __init__(self, resolver_address: str = "", *, budget_s: float = BUDGET_S,
                 clock=time.monotonic) -> None:
        self._clock = clock
        self._deadline = clock() + budget_s
        self.queries = 0
        self._failed = ""  # once the resolver failed to answer, the rest fail at once
        server = parse_resolver(resolver_address)
        if server is None:
            self.named = "the system's resolver (/etc/resolv.conf)"
            try:
                self._resolver: dns.resolver.Resolver | None = dns.resolver.Resolver(configure=True)
            except dns.exception.DNSException:
                self._resolver = None
            else:
                shown = ", ".join(str(n) for n in self._resolver.nameservers[:2])
                self.named = f"the system's resolver ({shown or 'none configured'})"
        else:
            host, port = server
            self.named = f"the resolver at {resolver_address.strip()} (DNS_RESOLVER)"
            self._resolver = dns.resolver.Resolver(configure=False)
            self._resolver.nameservers = [host]
            self._resolver.port = port

    def _ask(self, name: str, rdtype: str) -> list:
        if self._resolver is None:
            raise CouldNotAsk(f"{self.named} is not configured: set DNS_RESOLVER")
        if self._failed:
            raise CouldNotAsk(self._failed)
        remaining = self._deadline - self._clock()
        if remaining <= 0 or self.queries >= MAX_QUERIES:
            raise CouldNotAsk(f"the checks took too long asking {self.named}")
        self.queries += 1
        self._resolver.lifetime = self._resolver.timeout = min(PER_LOOKUP_S, remaining)
        try:
            answer = self._resolver.resolve(dns.name.from_text(name), rdtype, search=False,
                                            raise_on_no_answer=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except dns.resolver.LifetimeTimeout:
            self._failed = (f"{self.named} did not answer within {self._resolver.lifetime:g} s "
                            f"(asking {rdtype} {name})")
        except dns.resolver.NoNameservers:
            self._failed = f"{self.named} refused or failed to answer {rdtype} {name}"
        except dns.exception.DNSException as exc:
            self._failed = (f"{self.named} gave no usable answer to {rdtype} {name} "
                            f"({type(exc).__name__})")
        else:
            return list(answer.rrset or ())
        raise CouldNotAsk(self._failed)

    def txt(self, name: str) -> list[str]:
        """Each TXT record at `name`, its strings joined (a DKIM key comes in 255-byte parts)."""
        return [b"".join(r.strings).decode("utf-8", "replace") for r in self._ask(name, "TXT")]

    def mx(self, name: str) -> list[tuple[int, str]]:
        return sorted((int(r.preference), r.exchange.to_text(omit_final_dot=True).lower())
                      for r in self._ask(name, "MX"))

    def addresses(self, name: str) -> list[str]:
        """A and AAAA of `name` (an IP literal is itself)."""
        try:
            return [str(ipaddress.ip_address(name))]
        except ValueError:
            pass
        found = [r.address for r in self._ask(name, "A")]
        return found + [r.address for r in self._ask(name, "AAAA")]
