"""The reputation guard: each identity's hard-bounce and complaint rates over its last 1,000
sends and over 30 days (figures.py), the lines they are judged against (lines.py), and the
guard that pauses an identity crossing a limit (guard.py)."""
