"""What the owner sends: broadcasts (`broadcasts/`), automations (`automations/`), the public
archive (`archive/`) and reader analytics (`analytics/`). Builds on `segments` (who a campaign
reaches), `delivery`, `mail`, `webhooks` and `core`."""
