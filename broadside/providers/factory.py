"""The one factory of transports: an identity's transport URL -> the object that sends."""

from __future__ import annotations

import socket
from pathlib import Path

from broadside.providers.mailgun import MailgunTransport
from broadside.providers.postmark import PostmarkTransport
from broadside.providers.resend import ResendTransport
from broadside.providers.ses import SesTransport
from broadside.providers.urls import SMTP_SCHEMES, scheme_of
from broadside.transports import OutboxTransport, SmtpTransport, Transport

PROVIDERS = {"ses": SesTransport, "postmark": PostmarkTransport, "resend": ResendTransport,
             "mailgun": MailgunTransport}


def make_transport(url: str, instance_path: str, timeout: float = 30.0) -> Transport:
    """SMTP, a provider's HTTP API, or the outbox when the URL is empty or `outbox://`
    (validated beforehand by `urls.check_transport_url`)."""
    scheme = scheme_of(url)
    if scheme in SMTP_SCHEMES:
        return SmtpTransport(url, timeout=timeout, local_hostname=socket.getfqdn() or None)
    if scheme == "outbox":
        return OutboxTransport(Path(instance_path) / "outbox")
    return PROVIDERS[scheme](url, timeout=timeout)
