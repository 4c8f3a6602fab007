"""What one email is: the owner's merge fields (`merge_*`: parsed, checked, sandboxed, bounded),
Markdown to a frozen revision to one person's MIME bytes (`rendering`, `mime`), the owner's
design (`design`), the double opt-in email (`confirmation`) and its texts (`signup_texts`),
the Message-IDs that name their row (`message_refs`) and the signed unsubscribe links every
message carries (`unsubscribe_tokens`).
Builds on `core` only; nothing here sends."""
