"""Broadside's domain: what a newsletter is and how it is sent, with no web and no worker in it.

`webapp` (the pages, the API, the CLI) and `jobs` (the one sending worker) both build on this
package and never on each other; `docs/ARCHITECTURE.md` has the map and the layer rules, which
import-linter enforces (`.importlinter`). Nothing here imports Flask's request machinery:
configuration values and a SQLAlchemy session are passed in.
"""
