"""A DNS server on loopback for the deliverability tests (SPF, DKIM, DMARC, MX): dnslib's
`DNSServer` over UDP on a free port, answering from records the test sets, never the internet.

    with DnsServer() as dns:
        dns.add("example.com", "TXT", "v=spf1 ip4:127.0.0.1 -all")
        dns.add("s1._domainkey.example.com", "TXT", "v=DKIM1; k=rsa; p=" + key)  # split for you
        dns.add("example.com", "MX", "10 mx.example.com.")
        config["DNS_RESOLVER"] = dns.address   # "127.0.0.1:PORT"

A name with no records answers NXDOMAIN; a name with records of other types answers NOERROR
with no answer (as a real server does). TXT strings longer than 255 bytes are split into
255-byte chunks, as a published DKIM key must be. `queries` lists (name, type) asked, so a test
can see what was looked up.
"""

from __future__ import annotations

import threading
from collections import defaultdict

from dnslib import MX, QTYPE, RCODE, RR, TXT, A, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer


def _name(name: str) -> str:
    return name.rstrip(".").lower() + "."


class _Resolver(BaseResolver):
    def __init__(self, owner: DnsServer) -> None:
        self.owner = owner

    def resolve(self, request: DNSRecord, handler: object) -> DNSRecord:
        reply = request.reply()
        name = _name(str(request.q.qname))
        kind = QTYPE[request.q.qtype]
        with self.owner.lock:
            self.owner.queries.append((name.rstrip("."), kind))
            records = list(self.owner.records.get(name, ()))
        if not records:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        for record_kind, rdata in records:
            if record_kind == kind:
                reply.add_answer(RR(request.q.qname, QTYPE.reverse[record_kind], rdata=rdata,
                                    ttl=60))
        return reply


class DnsServer:
    """Records by name; `add` them before or while the code under test asks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[str, list[tuple[str, object]]] = defaultdict(list)
        self.queries: list[tuple[str, str]] = []
        self._server: DNSServer | None = None

    def add(self, name: str, kind: str, value: str) -> None:
        """One record: kind "TXT" (any length: chunked), "MX" ("10 mx.example.com.") or "A"."""
        if kind == "TXT":
            data = value.encode()
            rdata: object = TXT([data[i:i + 255] for i in range(0, len(data), 255)] or [b""])
        elif kind == "MX":
            preference, exchange = value.split()
            rdata = MX(exchange, int(preference))
        elif kind == "A":
            rdata = A(value)
        else:
            raise ValueError(f"DnsServer does not serve {kind} records")
        with self.lock:
            self.records[_name(name)].append((kind, rdata))

    def clear(self) -> None:
        with self.lock:
            self.records.clear()
            self.queries.clear()

    def start(self) -> DnsServer:
        self._server = DNSServer(_Resolver(self), port=0, address="127.0.0.1",
                                 logger=DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,-data"))
        self._server.start_thread()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server.server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.server.server_address[1])

    @property
    def address(self) -> str:
        """What DNS_RESOLVER takes: "127.0.0.1:PORT"."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> DnsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
