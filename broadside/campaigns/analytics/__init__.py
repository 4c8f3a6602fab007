"""Reader analytics, privacy first: off unless the owner chooses, per broadcast.

- modes.py      the three modes, the Settings default, a broadcast's choice (frozen at Send,
                after which it may only be turned off) and a list's per-person consent
- tokens.py     the signed open and click tokens (an aggregate token names no person)
- rewrite.py    `Tracker`: a recipient's rendered email with its links rewritten and the
                pixel added, at the worker's per-recipient render (jobs/recheck.py); a
                link whose address holds a merge field is tracked per person only
- bots.py       what looks like a machine: Apple Mail Privacy Protection, link scanners,
                hits within seconds of delivery, one client hitting several links at once
- repeats.py    one client loading a pixel or following a link again within ten minutes
                counts once (a keyed digest in Redis, never the address)
- counting.py   one hit, one `n = n + 1` on an aggregate row (and per-person rows only
                where the list allows them)
- report.py     what the broadcast page shows: days, links, totals
"""
