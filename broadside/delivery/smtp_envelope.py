"""The MAIL FROM and RCPT TO lines of one message, as the server's EHLO allows: the one place
an address becomes envelope bytes, for the lock-step and the pipelined conversation alike
(broadside.delivery.smtp).

An address is written by `wire_address`: an ASCII local part with the domain's A-label (any
server takes it), a local part outside ASCII as UTF-8, which needs SMTPUTF8 (RFC 6531): MAIL
FROM then carries the SMTPUTF8 parameter (and BODY=8BITMIME where offered, since the headers
are UTF-8). To a server that does not offer SMTPUTF8 nothing is written: the message is
refused by us (`ours`), on the recipient (phase rcpt: that one row fails, never retried, the
send goes on) or on the sender (phase mail: everyone's, so the broadcast pauses).
"""

from __future__ import annotations

from dataclasses import dataclass

from broadside.core.addresses import needs_smtputf8, wire_address
from broadside.delivery.transports import DeliveryError

# The words that say why a row failed on a server without SMTPUTF8; jobs.classify and the
# owner's pages read them as they are (Broadside's own sentence, no server was asked).
NEEDS_SMTPUTF8 = "needs SMTPUTF8"


@dataclass(frozen=True)
class Offers:
    """What the server's EHLO offered that the envelope depends on."""

    smtputf8: bool
    eightbitmime: bool
    where: str  # the server, in the owner's words (scheme://host:port)


def unsendable(verb: str, address: str, where: str) -> DeliveryError:
    """Our refusal of an address that needs SMTPUTF8 where it is not offered."""
    if verb == "rcpt":
        return DeliveryError("rcpt", None, (
            f"Broadside did not send it: this address {NEEDS_SMTPUTF8} (it has characters "
            f"outside ASCII before the @), which {where} does not offer. Send to it through "
            "an identity whose server offers SMTPUTF8, or ask the person for another "
            "address."), ours=True)
    return DeliveryError("mail", None, (
        f"Broadside did not send it: the sender address {address!r} {NEEDS_SMTPUTF8} (it "
        f"has characters outside ASCII before the @), which {where} does not offer. Change "
        "the sender address, then press Resume."), ours=True)


def _written(address: str, verb: str) -> str:
    """The address for the wire; a line break or a domain IDNA refuses is our refusal."""
    whose = "recipient's" if verb == "rcpt" else "sender"
    fix = ("Correct the address on the subscriber's page, or ask them for another one."
           if verb == "rcpt" else "Change the sender address, then press Resume.")
    if "\r" in address or "\n" in address or "<" in address or ">" in address:
        raise DeliveryError(verb, None, f"Broadside did not send it: the {whose} address has "
                            f"a line break or an angle bracket. {fix}", ours=True)
    try:
        return wire_address(address)
    except ValueError:
        raise DeliveryError(verb, None, f"Broadside did not send it: the domain of the {whose} "
                            f"address is not a valid international domain name. {fix}",
                            ours=True) from None


def envelope_lines(mail_from: str, rcpt: str, offers: Offers) -> tuple[bytes, bytes]:
    """MAIL FROM and RCPT TO, each with its CRLF; raises (phase mail or rcpt, ours) before
    anything is written when an address cannot go to this server."""
    sender, recipient = _written(mail_from, "mail"), _written(rcpt, "rcpt")
    utf8 = False
    if needs_smtputf8(rcpt):
        if not offers.smtputf8:
            raise unsendable("rcpt", rcpt, offers.where)
        utf8 = True
    if needs_smtputf8(mail_from):
        if not offers.smtputf8:
            raise unsendable("mail", mail_from, offers.where)
        utf8 = True
    params = (" SMTPUTF8" + (" BODY=8BITMIME" if offers.eightbitmime else "")) if utf8 else ""
    return (f"MAIL FROM:<{sender}>{params}\r\n".encode(),
            f"RCPT TO:<{recipient}>\r\n".encode())
