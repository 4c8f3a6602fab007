"""Subscribers in and out as CSV: the background import (`importer`: read by `csvfile`, written
a batch at a time by `batch`, duplicates found on disk by `seen`, rejected rows kept and shown
by `report`, imported people asked to confirm by `confirmations`) and the export (`export`)."""
