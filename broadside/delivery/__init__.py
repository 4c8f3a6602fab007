"""How mail leaves: transports (the protocols, `transports`; SMTP, `smtp`; the `.eml` folder,
`eml_folder`) and the providers' HTTP APIs (`providers/`), sending identities (`identities/`),
each stream's lease, hourly cap and wait totals in Redis (`lease`, `hourly`, `waits`,
`streams`), the queues through which work reaches the worker (`queues`), and transactional
mail: its queueing (`transactional`) and the one writer of its status (`transactional_ledger`).
Builds on `core` and `mail`."""
