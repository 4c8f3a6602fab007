"""Backups that restore: one archive of the database and the instance's files, and its restore
onto an empty database of either kind (`flask --app webapp backup|restore PATH`).

An archive is a tar file (gzip when its name ends in .gz or .tgz) whose first member is
`manifest.json` (`manifest.py`: schema revision, Broadside version, database kind, time,
rows per table, SHA-256 of every other member, whether secrets are in it), then the database
in one of three forms (`manifest.DATABASE_FORMS`), then the instance's uploads:

- `sqlite`: a SQLite file made by SQLite's online backup API (a consistent copy while the web
  process and the worker write), its secrets blanked and the file rebuilt (`VACUUM INTO`) so
  no old value survives in a free page (`sqlite_copy.py`);
- `pg_dump`: PostgreSQL's own custom-format dump, in the snapshot the row counts were read
  in (`postgres_tools.py`), only with `--with-secrets`: a dump cannot leave columns out;
- `rows`: one JSON line per row and a file per table, read in one REPEATABLE READ snapshot
  with the secrets blanked on the way (`rows.py`): PostgreSQL without secrets.

Restoring (`restoring.py`) verifies every checksum before it touches anything, refuses a
database that holds rows and a schema newer than the code's, builds the schema of the backup's
revision, loads the rows (PostgreSQL from a SQLite or `rows` backup: a row copy in foreign-key
order, then every sequence moved past its table's largest id), checks every table's count and
only then upgrades the schema to the code's newest. A delivery in `sending` in the archive
stays `sending`: the restored worker's repair makes it `unknown`, never sends it again
(invariant 5).
"""
