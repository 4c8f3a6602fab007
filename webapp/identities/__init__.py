"""Sending identities in the web app: the Settings page that lists, creates, edits, checks,
resumes and deletes them (`views.py`, blueprint `identities`) and its form (`form.py`). The
connection check of each identity's transport, which that page, `doctor` and the System page
share, is `webapp.doctor.identities`. The domain is `broadside.delivery.identities`.
"""
