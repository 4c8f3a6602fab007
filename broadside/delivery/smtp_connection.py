"""Opening an SMTP connection (TCP, implicit TLS or STARTTLS, EHLO, AUTH), every failure a
`DeliveryError` that says where it happened: connect, tls or auth. Nothing of a message is
written here, so each of these failures proves the message was not accepted (invariant 5)."""

from __future__ import annotations

import smtplib
import ssl

from broadside.delivery.transports import DeliveryError, network_words


def text(reply: bytes | str) -> str:
    return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)


def open_connection(scheme: str, host: str, port: int, username: str | None, password: str | None,
                    *, timeout: float, local_hostname: str | None) -> smtplib.SMTP:
    """A connection ready for MAIL FROM, as the transport URL's scheme and user ask."""
    # Made only where TLS is used: loading the system's certificates is a few ms.
    context = ssl.create_default_context() if scheme != "smtp" else None
    where = f"{scheme}://{host}:{port}"
    try:
        if scheme == "smtps":
            conn: smtplib.SMTP = smtplib.SMTP_SSL(
                host,
                port,
                timeout=timeout,
                context=context,
                local_hostname=local_hostname,
            )
        else:
            conn = smtplib.SMTP(
                host, port, timeout=timeout, local_hostname=local_hostname
            )
    except ssl.SSLError as exc:
        raise DeliveryError("tls", None, f"the secure connection (TLS) to {where} failed: "
                                         f"{network_words(exc, where)}") from None
    except smtplib.SMTPConnectError as exc:
        raise DeliveryError("connect", exc.smtp_code, text(exc.smtp_error), network=True) from None
    except (OSError, smtplib.SMTPException) as exc:
        raise DeliveryError(
            "connect", None, f"could not connect to {where}: {network_words(exc, where)}",
            network=True) from None
    try:
        conn.ehlo_or_helo_if_needed()
        if scheme == "smtp+starttls":
            if not conn.has_extn("starttls"):
                raise DeliveryError("tls", None, "the server does not offer STARTTLS")
            conn.starttls(context=context)
            conn.ehlo()
        if username is not None:
            conn.login(username, password or "")
    except DeliveryError:
        close_quietly(conn)
        raise
    except smtplib.SMTPAuthenticationError as exc:
        close_quietly(conn)
        raise DeliveryError("auth", exc.smtp_code, text(exc.smtp_error)) from None
    except smtplib.SMTPNotSupportedError:
        close_quietly(conn)
        raise DeliveryError("auth", None, f"{where} does not offer login (AUTH) on this "
                                          "connection; use smtp+starttls:// or smtps:// if it "
                                          "wants TLS first, or leave out the user name") from None
    except ssl.SSLError as exc:
        close_quietly(conn)
        raise DeliveryError("tls", None, f"the secure connection (TLS) to {where} failed: "
                                         f"{network_words(exc, where)}") from None
    except smtplib.SMTPResponseException as exc:
        close_quietly(conn)
        raise DeliveryError("connect", exc.smtp_code, text(exc.smtp_error)) from None
    except (OSError, smtplib.SMTPException) as exc:
        close_quietly(conn)
        raise DeliveryError(
            "connect", None, f"the connection to {where} was lost while greeting it: "
                             f"{network_words(exc, where)}", network=True
        ) from None
    return conn


def close_quietly(conn: smtplib.SMTP | None) -> None:
    if conn is None:
        return
    try:
        conn.close()
    except Exception:  # closing a broken socket may fail in any way
        pass
