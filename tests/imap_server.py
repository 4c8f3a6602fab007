"""A real IMAP server for tests: Dovecot (Debian's dovecot-imapd) started privately from a temp
folder on a free loopback port, with one user and a Maildir (FIELD-NOTES: the minimal
configuration that works as root). `append` puts a message in a folder as a mail server's
delivery would; `count` and `messages` look at a folder."""

from __future__ import annotations

import imaplib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.smtp_server import free_port

DOVECOT = "/usr/sbin/dovecot"
USER, PASSWORD = "bounces@example.com", "s3cret-mailbox-pw"

_CONFIG = """\
protocols = imap
listen = 127.0.0.1
base_dir = {dir}/run
state_dir = {dir}/state
log_path = {dir}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_failure_delay = 0
first_valid_uid = 1
mail_location = maildir:~/Maildir
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {dir}/passwd
}}
userdb {{
  driver = static
  args = uid=dovecot gid=dovecot home={dir}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
"""


class Dovecot:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="broadside-dovecot-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The bounce mailbox URL of its user's INBOX (no TLS: loopback)."""
        return (f"imap://{USER.replace('@', '%40')}:{PASSWORD}@127.0.0.1:{self.port}/INBOX"
                "?tls=none")

    def start(self) -> Dovecot:
        for sub in ("run", "state", "home"):
            (self.dir / sub).mkdir()
        (self.dir / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
        (self.dir / "dovecot.conf").write_text(_CONFIG.format(dir=self.dir, port=self.port))
        shutil.chown(self.dir / "home", "dovecot", "dovecot")
        os.chmod(self.dir, 0o755)
        self.proc = subprocess.Popen([DOVECOT, "-c", str(self.dir / "dovecot.conf"), "-F"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.02)
        log = (self.dir / "dovecot.log").read_text() if (self.dir / "dovecot.log").exists() else ""
        raise RuntimeError(f"dovecot did not start: {log[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)

    def connect(self) -> imaplib.IMAP4:
        conn = imaplib.IMAP4("127.0.0.1", self.port, timeout=10)
        conn.login(USER, PASSWORD)
        return conn

    def append(self, messages: list[bytes], folder: str = "INBOX") -> None:
        conn = self.connect()
        try:
            for raw in messages:
                kind, data = conn.append(folder, None, None, raw)
                assert kind == "OK", data
        finally:
            conn.logout()

    def count(self, folder: str) -> int:
        conn = self.connect()
        try:
            kind, data = conn.status(f'"{folder}"', "(MESSAGES)")
            if kind != "OK":
                return 0
            return int(data[0].split(b"MESSAGES ")[1].rstrip(b")"))
        finally:
            conn.logout()

    def clear(self) -> None:
        """Every folder emptied (and the work folders removed): a clean mailbox per test."""
        conn = self.connect()
        try:
            for folder in ("Processed", "Unrecognised"):
                conn.delete(f'"{folder}"')
            _, data = conn.select("INBOX")
            if int(data[0] or 0):
                conn.store("1:*", "+FLAGS.SILENT", r"(\Deleted)")
                conn.expunge()
        finally:
            conn.logout()
