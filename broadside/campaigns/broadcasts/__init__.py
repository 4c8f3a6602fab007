"""Broadcasts: every state change (`lifecycle`), every delivery row's state (`ledger`, with the
events and webhooks a move leaves, `delivery_events`, and PostgreSQL's one-statement moves,
`bulk_moves`), the owner's actions (`service`, `launch`, `drafts`, `cancelling`), who a send
would reach (`audience`), the audience snapshot (`snapshot`), progress, evidence (`evidence`,
in the owner's words: `delivery_words`), and the history compaction (`compaction`)."""
