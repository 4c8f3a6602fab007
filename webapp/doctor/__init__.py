"""`flask --app webapp doctor` and the System page: is this installation able to send?

Each check answers in one line (`check.Check`), with what to do when it fails. The checks
take the app (its config, its Redis client, its migrations) and never a request, so the CLI
and the page share them. They are quick: every network step has a timeout of a few seconds,
and nothing is sent.

- `configuration`: the variables as understood, and BASE_URL;
- `services`: the database (reachable, schema current) and Redis;
- `worker`: who holds the sending lease, and its heartbeat;
- `backups`: when the last backup was taken (with BACKUP_DIR), a warning past its age;
- `smtp`: the default identity's transport (SMTP, a provider's API, or the outbox folder),
  checked and stored for the send page;
- `identities`: each other sending identity's transport, checked and stored;
- `report`: all of them in the order a self-hoster fixes things, and the CLI's printout.
"""
