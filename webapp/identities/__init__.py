"""Sending identities in the web app: the Settings page that lists, creates, edits, checks,
resumes and deletes them (`views.py`, blueprint `identities`), its form (`form.py`), and the
connection check of each identity's transport that `doctor`, that page and the System page
share (`checks.py`). The domain is `broadside.delivery.identities`.

The blueprint lives in `views.py` (imported by `webapp.create_app`), not here: `webapp.doctor`
imports `checks.py`, and the views import `webapp.doctor`.
"""
