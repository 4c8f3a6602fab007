"""What DKIM signing costs per message, as a ratio to unsigned sending, in one run.

The real SMTP transport (broadside.delivery.smtp) sends N newsletter-sized messages (a 2048-bit
RSA key; ~6 KB of MIME, HTML and text, made by broadside.mail.rendering) to aiosmtpd in a
process of its own (bench/smtp_sink.py `record`), the way the worker does at full speed: each
next envelope riding behind the previous body (`start(then=)`, `finish`, `start_next`), the
signature made inside the transport after the pace, before the body is written. Rounds
alternate unsigned and signed (ABAB...), the server's own first-to-last message times give
each rate, and the median of the per-pair ratios is reported. Also shown, without a target:
the signing alone (dkimpy, per message, in this process) and, for comparison, one RSA
signature by OpenSSL (the `cryptography` package) on the same key.

    .venv/bin/python bench/dkim_cost.py [--messages 1000] [--rounds 3]

(Not bench/dkim.py: a script's folder comes first on sys.path, and that name would shadow
dkimpy's own `dkim` package.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from smtp_sink import Sink

from broadside.delivery.smtp import SmtpTransport
from broadside.mail import dkim_keys
from broadside.mail.dkim_signing import DkimSigner
from broadside.mail.rendering import RenderedEmail, message_bytes

PARAGRAPH = ("Broadside sends this week's notes to everyone on the list, paced, re-checked at "
             "send time and signed. ") * 6


def messages(count: int) -> list[tuple[str, bytes]]:
    html = "".join(f"<h2>Part {n}</h2><p>{PARAGRAPH}</p>" for n in range(8))
    text = "\n\n".join(f"Part {n}\n\n{PARAGRAPH}" for n in range(8))
    out = []
    for n in range(count):
        rcpt = f"reader{n}@readers.example"
        link = f"https://news.acme.example/u/{n:08d}"
        out.append((rcpt, message_bytes(
            RenderedEmail(subject="This week at Acme", html=html, text=text),
            from_addr="Acme News <news@acme.example>", to_addr=rcpt,
            message_id=f"<bench.{n}@acme.example>",
            headers={"List-Unsubscribe": f"<{link}>",
                     "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"})))
    return out


def send_riding(url: str, batch: list[tuple[str, bytes]], signer: DkimSigner | None) -> None:
    """The worker's riding way (jobs.riding) without the database: each message's wire made
    ahead (as the re-check builds it), each next envelope behind the previous body."""
    transport = SmtpTransport(url, signer=signer)
    wires = [transport.wire(m) for _, m in batch]
    sender = "news@acme.example"
    try:
        transport.start(sender, batch[0][0], wires[0],
                        then=(sender, batch[1][0]) if len(batch) > 1 else None)
        for n in range(1, len(batch)):
            transport.finish()
            then = (sender, batch[n + 1][0]) if n + 1 < len(batch) else None
            transport.start_next(wires[n], then=then)
        transport.finish()
    finally:
        transport.close()


def server_rate(sink: Sink, count: int) -> float:
    sink.wait_for(count, timeout=300)
    stats = sink.stats()
    return stats["count"] / (max(stats["end_at"]) - min(stats["mail_at"]))


def run(count: int, rounds: int) -> dict:
    key = dkim_keys.generate_private_key()
    signer = DkimSigner("news", key)
    batch = messages(count)
    sink = Sink("record")
    rates: dict[str, list[float]] = {"unsigned": [], "signed": []}
    try:
        send_riding(sink.url, batch[:50], None)  # warm-up: connection, caches
        for round_ in range(rounds):
            order = ("unsigned", "signed") if round_ % 2 == 0 else ("signed", "unsigned")
            for kind in order:
                sink.reset()
                send_riding(sink.url, batch, signer if kind == "signed" else None)
                rates[kind].append(server_rate(sink, count))
    finally:
        sink.close()
    ratios = [s / u for s, u in zip(rates["signed"], rates["unsigned"], strict=True)]
    started = time.perf_counter()
    for _, message in batch[:200]:
        signer.header(message)
    dkimpy_ms = (time.perf_counter() - started) / 200 * 1000
    private = serialization.load_pem_private_key(key.encode(), password=None)
    started = time.perf_counter()
    for _, message in batch[:200]:
        private.sign(message, padding.PKCS1v15(), hashes.SHA256())  # type: ignore[union-attr,call-arg]
    openssl_ms = (time.perf_counter() - started) / 200 * 1000
    return {"rates": rates, "ratios": ratios, "ratio": statistics.median(ratios),
            "dkimpy_ms": dkimpy_ms, "openssl_ms": openssl_ms, "size": len(batch[0][1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = run(args.messages, args.rounds)
    for kind, values in result["rates"].items():
        print(f"{kind:9} " + "  ".join(f"{v:,.0f}" for v in values) + " msg/s")
    print("signed / unsigned, per pair: " + "  ".join(f"{r:.2f}" for r in result["ratios"])
          + f"; median {result['ratio']:.2f}")
    print(f"signing alone: dkimpy {result['dkimpy_ms']:.2f} ms a message; one OpenSSL RSA "
          f"signature {result['openssl_ms']:.2f} ms ({result['size']:,} bytes a message)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
