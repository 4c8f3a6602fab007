"""The reader's side of a broadcast: the list's public archive (published issues, their
public copies, the Atom feed) and the "View in your browser" link to a reader's own copy.

- copies.py: the public copy of a frozen revision (no reader's data, no unsubscribe link)
  and a reader's own copy (theirs, for the view-in-browser page);
- links.py: the signed view-in-browser token and the worker's per-slice link maker;
- service.py: the owner's switches (archive on/off, publish, the link) and the public reads.
"""
