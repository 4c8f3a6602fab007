"""Where a worker's send loop spends its time, from py-spy's raw samples (bench/loop_ab.py
--profile DIR): each sample under `Slice.run` is put in one part (the re-check query, the
render, the SMTP exchange, the claim, the flush's statements, the commits, the lease).

    .venv/bin/python bench/loop_split.py DIR/*.txt

Samples are taken with --idle, so waiting on PostgreSQL or the SMTP server counts where it
happens. Shares are of the slice's own samples; the absolute sample counts (at py-spy's rate)
compare two workers that sent the same number of messages.
"""

from __future__ import annotations

import collections
import re
import sys

# (part, the frames that put a sample in it), first match wins
PARTS = [
    ("re-check query", ("recipient_state", "StateReader.__call__")),
    ("frequency cap query", ("recently_received",)),
    ("render (prepare)", ("Recheck.prepare",)),
    ("claim (claim_due)", ("BroadcastRows.claim", "AutomationRows.claim", "TransactionalRows.claim")),
    ("flush: counters", ("move_counters",)),
    ("flush: row moves", ("move_rows",)),
    ("flush: events", ("record", "keep_first_claim")),
    ("flush: outgoing webhook events", ("emit",)),
    ("flush: commit and other", ("Batch.flush",)),
    ("SMTP start (pace, envelope, body)", ("OneByOneSending._start", "RidingSending._start")),
    ("SMTP finish (the verdict)", ("Turn.finish",)),
    ("commit after the claim", ("Session.commit",)),
    ("lease check", ("Slice._lease_ok",)),
]


def part_of(frames: list[str]) -> str | None:
    names = [re.sub(r" \(.*", "", frame) for frame in frames]
    if "Slice.run" not in names:
        return None
    below = set(names[names.index("Slice.run") + 1:])
    for part, markers in PARTS:
        if any(marker in below for marker in markers):
            return part
    return "other"


def main() -> int:
    for path in sys.argv[1:]:
        parts: collections.Counter[str] = collections.Counter()
        total = 0
        with open(path) as samples:
            for line in samples:
                stack, _, count = line.rstrip().rpartition(" ")
                part = part_of(stack.split(";"))
                if part is not None:
                    parts[part] += int(count)
                    total += int(count)
        print(f"{path}: {total} samples in the slice")
        for part, count in parts.most_common():
            print(f"  {100 * count / total:5.1f}%  {count:6}  {part}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
