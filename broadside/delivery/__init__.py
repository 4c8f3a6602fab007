"""How mail leaves: transports (SMTP and the `.eml` folder: `transports`, `eml_folder`) and the
providers' HTTP APIs (`providers/`), sending identities (`identities/`), each stream's lease,
hourly cap and wait totals in Redis (`lease`, `hourly`, `waits`, `streams`), the queues through
which work reaches the worker (`queues`) and transactional mail's rows (`transactional`).
Builds on `core` and `mail`."""
