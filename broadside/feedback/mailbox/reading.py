"""One pass over one bounce mailbox: the new messages, in batches, within a time budget.

For each batch (at most `batch` UIDs above the last one done, oldest first): fetch them
(BODY.PEEK: not marked seen), apply each in its own transaction with its processed row
(broadside.feedback.mailbox.applying: once only), and only then move the batch to Processed
or Unrecognised and remember its highest UID (state.advance). So:

- a crash before a message's commit leaves it unread in the inbox: read again, applied then;
- a crash after its commit and before its move leaves it in the inbox, UID not remembered:
  read again, its processed row found by the UNIQUE key, and it is only moved;
- a message is never deleted: it is moved, after its effect is committed.

A new UIDVALIDITY (the server renumbered the folder) starts again from UID 0; the processed
rows still find each message by its Message-ID. The pass stops between batches when `keep()`
says so (the worker's stop, or its mailbox lease no longer surely its own) or past `budget_s`:
the next pass continues where this one stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from broadside.core.mailbox_urls import Mailbox
from broadside.core.timeutil import utcnow
from broadside.feedback.mailbox import state
from broadside.feedback.mailbox.applying import PROCESSED, UNRECOGNISED, apply_message, folder_of_processed
from broadside.feedback.mailbox.imap import Imap
from broadside.feedback.mailbox.reports import read_report
from broadside.mail.verp import Verp

log = logging.getLogger("broadside.feedback")

BATCH = 50
BUDGET_S = 5.0


@dataclass
class Pass:
    """What one pass did."""

    applied: int = 0  # messages processed now
    again: int = 0  # found processed already (a crash before their move): only moved
    moved: dict[str, int] = field(default_factory=dict)
    more: bool = False  # stopped with messages left


def read_mailbox(session: Session, box: Mailbox, verp: Verp, *, keep: Callable[[], bool] = lambda: True,
                 batch: int = BATCH, budget_s: float = BUDGET_S, timeout: float = 20.0,
                 clock: Callable[[], float] = time.monotonic) -> Pass:
    """Read `box`'s new messages (see the module's docstring). Raises MailboxError."""
    done = Pass()
    started = clock()
    with Imap(box, timeout=timeout) as imap:
        was, last_uid = state.position(session, box.key)
        if was != imap.uid_validity:
            state.renumbered(session, box.key, was, imap.uid_validity)
            last_uid = 0
        validity = imap.uid_validity
        for folder in (PROCESSED, UNRECOGNISED):
            imap.ensure_folder(folder)
        uids = imap.uids_after(last_uid)
        while uids:
            if not keep() or clock() - started > budget_s:
                done.more = True
                break
            chunk, uids = uids[:batch], uids[batch:]
            folders: dict[str, list[int]] = {PROCESSED: [], UNRECOGNISED: []}
            for uid, raw in imap.fetch(chunk):
                report = read_report(raw, verp)
                result = apply_message(session, box.key, validity, uid, report)
                if result is None:
                    done.again += 1
                    folder = folder_of_processed(session, box.key, validity, uid, report.message_key)
                else:
                    done.applied += 1
                    folder = result[1]
                folders[folder].append(uid)
            for folder, moving in folders.items():
                imap.move(moving, folder)
                if moving:
                    done.moved[folder] = done.moved.get(folder, 0) + len(moving)
            state.advance(session, box.key, validity, max(chunk))
    state.read_ok(session, box.key, utcnow())
    return done
