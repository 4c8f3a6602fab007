"""Bounces read from an identity's bounce mailbox (IMAP): parsed (reports.py), applied once
each with the effect of a provider's bounce webhook (applying.py), read in bounded batches and
moved to `Processed` or `Unrecognised` only after their effect is committed (reading.py over
imap.py), each mailbox's standing kept by state.py."""
