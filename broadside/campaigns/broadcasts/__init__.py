"""Broadcasts: every state change (`lifecycle`), every delivery row's state (`ledger`), the
owner's actions (`service`, `launch`, `drafts`, `cancelling`), the audience snapshot
(`snapshot`), progress and evidence, and the history compaction (`compaction`)."""
