"""A failed connection in the owner's words, never a Python exception's text.

Python's own messages ("[Errno 111] Connection refused", "<urllib3.connection.HTTPConnection
object at 0x…>: Failed to establish a new connection") are for the log; what a page or an API
answer says is one of a few plain phrases, chosen by the root cause of the failure. Used by the
transports (SMTP, the providers' APIs) and the outgoing webhooks' POSTs.
"""

from __future__ import annotations

import http.client
import logging
import os
import smtplib
import socket
import ssl


def connection_words(exc: BaseException, where: str, log: logging.Logger) -> str:
    """What went wrong with a connection, in the owner's words: refused, timed out, reset,
    closed, a name that does not resolve, a certificate not accepted. The exception itself
    goes to `log` (the caller's), never to a page. `where`: what was being talked to."""
    log.info("connection to %s failed: %r", where, exc)
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:  # the root cause decides the words
        seen.add(id(cause))
        words = _words_of(cause)
        if words:
            return words
        cause = cause.__cause__ or cause.__context__ or _wrapped(cause)
    return "the connection failed"


def _wrapped(exc: BaseException) -> BaseException | None:
    """The error a library wrapped without chaining it (urllib3's ProtocolError holds it)."""
    return next((arg for arg in exc.args if isinstance(arg, BaseException)), None)


def _words_of(exc: BaseException) -> str | None:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ("the server's certificate was not accepted"
                + (f" ({exc.verify_message})" if exc.verify_message else ""))
    if isinstance(exc, ssl.SSLError):
        return "the TLS handshake did not complete"
    if isinstance(exc, socket.gaierror):
        return "its host name could not be found (check the spelling, and the DNS)"
    if isinstance(exc, ConnectionRefusedError):
        return "the connection was refused (nothing answers on that port)"
    # urllib3's and botocore's timeouts are classes of their own, named so (not imported here).
    if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
        return "no answer in time (timed out)"
    if isinstance(exc, (BrokenPipeError, ConnectionAbortedError, EOFError,
                        smtplib.SMTPServerDisconnected, http.client.RemoteDisconnected,
                        http.client.IncompleteRead)):
        return "the server closed the connection"
    if isinstance(exc, ConnectionResetError):
        return "the connection was reset"
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno).lower()
    return None
