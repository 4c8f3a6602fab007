"""The one factory of transports: an identity's transport URL -> the object that sends.

A provider's module is imported only when an identity uses it: botocore (SES) alone is about
6 MB of a worker's memory, which a worker sending over SMTP never needs.
"""

from __future__ import annotations

import importlib
import socket
from pathlib import Path

from broadside.core.transport_urls import SMTP_SCHEMES, scheme_of
from broadside.delivery.eml_folder import OutboxTransport
from broadside.delivery.smtp import SmtpTransport
from broadside.delivery.transports import Transport
from broadside.mail.dkim_signing import DkimSigner

# scheme -> (module, class), imported on first use.
PROVIDERS = {"ses": ("broadside.delivery.providers.ses", "SesTransport"),
             "postmark": ("broadside.delivery.providers.postmark", "PostmarkTransport"),
             "resend": ("broadside.delivery.providers.resend", "ResendTransport"),
             "mailgun": ("broadside.delivery.providers.mailgun", "MailgunTransport")}


def make_transport(url: str, instance_path: str, timeout: float = 30.0, *,
                   allow_private: bool = False, signer: DkimSigner | None = None) -> Transport:
    """SMTP, a provider's HTTP API, or the outbox when the URL is empty or `outbox://`
    (validated beforehand by `urls.check_transport_url`). `allow_private` is the configuration's
    PROVIDER_ENDPOINTS_ALLOW_PRIVATE: a provider's endpoint may then be a private or loopback
    address (checked by the transport before each connection). `signer`: DKIM signing of SMTP
    and the outbox (a provider signs its own mail: it is not given one)."""
    scheme = scheme_of(url)
    if scheme in SMTP_SCHEMES:
        return SmtpTransport(url, timeout=timeout, local_hostname=socket.getfqdn() or None,
                             signer=signer)
    if scheme == "outbox":
        return OutboxTransport(Path(instance_path) / "outbox", signer=signer)
    module, name = PROVIDERS[scheme]
    transport: Transport = getattr(importlib.import_module(module), name)(
        url, timeout=timeout, allow_private=allow_private)
    return transport
