"""Automations at 100,000 subscribers: entering everyone a segment matches into a lifecycle
automation.

Target (issue 15): entering 100,000 people into a lifecycle automation < 5 s, on SQLite and
on PostgreSQL. The population is the segments benchmark's (100,000 people with five attributes,
one or two lists, a history of five broadcasts); the segment matches everyone active (about
95,000 people). What is timed is `broadside.campaigns.automations.entering.evaluate` as the worker runs
it (its own time budget per job, stopping at a batch boundary), summed over the jobs until the
evaluation finishes: the entries, their events and one message per step (two steps) for each
person, each written by an INSERT ... SELECT per batch of 5,000.

Run alone: .venv/bin/python bench/automations.py [--backend sqlite|postgresql]
(bench/run_all.py runs it for both databases.)
"""

from __future__ import annotations

import argparse
import sys
import time

import segments
from harness import Bench
from report import Figure, below

ENTER_S = 5.0


def measure(app, backend: str, ids: dict[str, int]) -> list[Figure]:
    from sqlalchemy import func, select

    from broadside.campaigns.automations import entering
    from broadside.campaigns.automations import service as automations
    from broadside.core.models import AutomationEntry, AutomationMessage
    from broadside.core.site_settings import get_settings
    from broadside.segments import service as segment_service
    from webapp.extensions import db

    with app.app_context():
        session = db.session
        # An automation is enabled only with a postal address to print.
        get_settings(session).postal_address = "Bench Ltd, 1 Main Street"
        session.commit()
        everyone = segment_service.create_segment(session, "Everyone in the EU", {"all": [
            {"field": "attributes.country", "op": "equals", "value": "EU"}]})
        data = automations.parse_input({
            "name": "Lifecycle", "trigger": {"type": "segment", "segment_id": everyone.id},
            "steps": [{"delay": "PT0S", "subject": "Hello {{ name }}", "body": "One"},
                      {"delay": "P3D", "subject": "Again", "body": "Two"}]})
        automation = automations.enable(session, automations.create_automation(
            session, data, default_from="Bench <b@bench.example>").id)
        jobs, seconds = 0, 0.0
        while True:
            started = time.perf_counter()
            result = entering.evaluate(session)
            seconds += time.perf_counter() - started
            jobs += 1
            if result.finished:
                break
        entered = session.scalar(select(func.count()).select_from(AutomationEntry)
                                 .where(AutomationEntry.automation_id == automation.id))
        messages = session.scalar(select(func.count()).select_from(AutomationMessage)
                                  .where(AutomationMessage.automation_id == automation.id))
        session.remove()
    return [Figure("automations", f"enter a lifecycle automation, {backend}", seconds, "s",
                   f"< {ENTER_S:.0f} s", below(seconds, ENTER_S),
                   f"{entered:,} people entered with {messages:,} step messages, in {jobs} "
                   f"evaluation job(s) of at most 3 s each")]


def run(bench: Bench, backend: str) -> list[Figure]:
    url = bench.sqlite_url("automations") if backend == "sqlite" else bench.postgres_url("automations")
    app = bench.app(url)
    ids = segments.populate(app)
    return measure(app, backend, ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    args = parser.parse_args()
    bench = Bench()
    failed = False
    try:
        for backend in args.backend or ["sqlite", "postgresql"]:
            for figure in run(bench, backend):
                failed |= figure.ok is False
                print(f"{figure.result:5} {figure.name:45} {figure.shown():>10}  {figure.detail}")
    finally:
        bench.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
