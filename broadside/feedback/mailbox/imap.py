"""The IMAP conversation with one bounce mailbox (imaplib): connect (TLS, STARTTLS, or none on
loopback), log in, select the folder and read its UIDVALIDITY, list the UIDs after the last
one read, fetch a batch without marking it seen, and move messages to a folder.

A move is `UID MOVE` (RFC 6851) where the server offers it; else `UID COPY`, then the
\\Deleted flag and `UID EXPUNGE` (UIDPLUS) on those UIDs only. Either way a message leaves
the inbox only after its effect was committed (the caller moves after the commit), and a
message is never deleted outright. Every failure is a `MailboxError` in the owner's words;
the library's own text goes to the log.
"""

from __future__ import annotations

import imaplib
import logging
import re
import ssl
from collections.abc import Iterable

from broadside.core.connection_words import connection_words
from broadside.core.mailbox_urls import Mailbox

log = logging.getLogger("broadside.feedback")

TIMEOUT_S = 20.0
_UID = re.compile(rb"UID (\d+)")
_VALIDITY = re.compile(rb"UIDVALIDITY (\d+)")


class MailboxError(Exception):
    """The mailbox could not be read: the message says why, for the owner."""


def _quoted(folder: str) -> str:
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Imap:
    """One logged-in connection with its folder selected (a context manager)."""

    def __init__(self, box: Mailbox, timeout: float = TIMEOUT_S,
                 context: ssl.SSLContext | None = None) -> None:
        self.box = box
        where = f"the bounce mailbox at {box.host}:{box.port}"
        try:
            if box.tls == "tls":
                self.conn: imaplib.IMAP4 = imaplib.IMAP4_SSL(
                    box.host, box.port, ssl_context=context or ssl.create_default_context(),
                    timeout=timeout)
            else:
                self.conn = imaplib.IMAP4(box.host, box.port, timeout=timeout)
                if box.tls == "starttls":
                    self.conn.starttls(context or ssl.create_default_context())
        except (OSError, imaplib.IMAP4.error, ssl.SSLError) as exc:
            if isinstance(exc, imaplib.IMAP4.error) and "STARTTLS" in str(exc).upper():
                raise MailboxError(f"{where} does not offer STARTTLS: use imaps:// (port 993)."
                                   ) from None
            raise MailboxError(connection_words(exc, where, log)) from None
        try:
            self.conn.login(box.user, box.password)
        except imaplib.IMAP4.error:
            self.close()
            raise MailboxError(f"The mailbox at {box.host} refused the login: check the user "
                               "name and password in the bounce mailbox URL.") from None
        except OSError as exc:
            self.close()
            raise MailboxError(connection_words(exc, where, log)) from None
        self.uid_validity = self._select()
        self.capabilities = {c.upper() for c in self._capabilities()}

    def _capabilities(self) -> list[str]:
        kind, data = self.conn.capability()
        return data[0].decode("ascii", "replace").split() if kind == "OK" and data else []

    def _select(self) -> int:
        kind, _ = self.conn.select(_quoted(self.box.folder))
        if kind != "OK":
            self.close()
            raise MailboxError(f"The mailbox has no folder {self.box.folder!r}: name an existing "
                               "one after the / of the URL (usually INBOX).")
        _, data = self.conn.response("UIDVALIDITY")
        value = data[0] if data and data[0] else b"0"
        return int(value)

    def __enter__(self) -> Imap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.conn.logout()
        except (OSError, imaplib.IMAP4.error, AttributeError):
            pass

    def ensure_folder(self, folder: str) -> None:
        """Create `folder` when missing (an existing one is left alone)."""
        kind, data = self.conn.list('""', _quoted(folder))
        if kind == "OK" and data and data[0]:
            return
        kind, data = self.conn.create(_quoted(folder))
        if kind != "OK":
            raise MailboxError(f"The mailbox would not create the folder {folder!r} "
                               "(its answer is in the worker's log).")

    def uids_after(self, last_uid: int) -> list[int]:
        """The UIDs above `last_uid`, ascending (`n:*` names the last message even when its UID
        is below n: those are left out)."""
        kind, data = self.conn.uid("SEARCH", f"UID {last_uid + 1}:*")
        if kind != "OK":
            raise MailboxError("The mailbox refused to list its messages.")
        found = [int(x) for x in (data[0] or b"").split()] if data else []
        return sorted(u for u in found if u > last_uid)

    def fetch(self, uids: Iterable[int]) -> list[tuple[int, bytes]]:
        """Each message's UID and bytes, without marking it \\Seen."""
        wanted = ",".join(str(u) for u in uids)
        if not wanted:
            return []
        kind, data = self.conn.uid("FETCH", wanted, "(BODY.PEEK[])")
        if kind != "OK":
            raise MailboxError("The mailbox refused to hand over its messages.")
        found: list[tuple[int, bytes]] = []
        for item in data:
            if isinstance(item, tuple) and len(item) == 2:
                match = _UID.search(item[0])
                if match:
                    found.append((int(match.group(1)), item[1]))
        return sorted(found)

    def move(self, uids: list[int], folder: str) -> None:
        """Move these messages to `folder` (see the module's docstring)."""
        if not uids:
            return
        wanted = ",".join(str(u) for u in uids)
        if "MOVE" in self.capabilities:
            kind, _ = self.conn.uid("MOVE", wanted, _quoted(folder))
        else:
            kind, _ = self.conn.uid("COPY", wanted, _quoted(folder))
            if kind == "OK":
                self.conn.uid("STORE", wanted, "+FLAGS.SILENT", r"(\Deleted)")
                if "UIDPLUS" in self.capabilities:
                    kind, _ = self.conn.uid("EXPUNGE", wanted)
        if kind != "OK":
            raise MailboxError(f"The mailbox would not move messages to {folder!r}.")


def check_login(box: Mailbox, timeout: float = 10.0) -> str:
    """Log in and select the folder (the doctor's check); returns what was found."""
    with Imap(box, timeout=timeout) as imap:
        kind, data = imap.conn.status(_quoted(box.folder), "(MESSAGES)")
        count = "?"
        if kind == "OK" and data and data[0]:
            match = re.search(rb"MESSAGES (\d+)", data[0])
            count = match.group(1).decode() if match else "?"
        return f"logged in to {box.host}; {box.folder} holds {count} message(s)"

