"""Side by side: the importer of two checkouts on the same generated CSV, interleaved.

Each run is a fresh interpreter whose `broadside` comes from the checkout named (PYTHONPATH),
on a fresh database (SQLite file or PostgreSQL database), and times what the worker's import
job does: `importer.process` (count the rows, read, validate, write the batches), then the
same file again (everyone known). The upload's copy to disk is not in the figure. Runs
alternate A, B, B, A, ... so the machine's load falls on both alike; the figures are printed
per run and as the ratio of medians. `--profile FILE` writes a cProfile of the first import
of each run instead (slower; use for where the time goes, not for the figures).

Run: .venv/bin/python bench/import_ab.py --base /tmp/import_base [--rows 100000]
     [--rounds 3] [--backend sqlite|postgresql]
(the base checkout: e.g. `git archive main | tar -x -C /tmp/import_base`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
POSTGRES_URL = os.environ.get("BROADSIDE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(workdir: Path, database_url: str, csv_path: Path, profile: str | None) -> None:
    from flask_migrate import upgrade

    from broadside.audience.lists import create_list
    from broadside.audience.transfer import importer
    from webapp import create_app
    from webapp.extensions import db

    app = create_app({"INSTANCE_PATH": str(workdir / "instance"), "DATABASE_URL": database_url,
                      "SECRET_KEY": "bench-secret-key-0123456789",
                      "BROADSIDE_NAMESPACE": f"bench-ab-{uuid.uuid4().hex[:6]}"}, environ={})
    with app.app_context():
        upgrade()
        list_id = create_list(db.session, "A/B").id
        db.session.remove()
        figures: dict = {"root": importer.__file__}

        def once(key: str, profiled: bool) -> None:
            with open(csv_path, "rb") as stream:
                record = importer.receive_upload(
                    db.session, list_id, csv_path.name, stream,
                    importer.import_dir(app.instance_path), 10**10, consent="opted_in")
            path = importer.import_path(app.instance_path, record.id)
            started = time.perf_counter()
            if profiled:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            record = importer.process(db.session, record.id, path)
            if profiled:
                profiler.disable()
                profiler.dump_stats(profile)
            figures[key] = time.perf_counter() - started
            figures[key + "_counts"] = [record.status, record.total_rows, record.processed_rows,
                                        record.imported, record.updated, record.rejected]
            db.session.remove()

        once("first", bool(profile))
        figures["peak_mb"] = peak_rss_mb()
        once("again", False)
        db.engine.dispose()
    print(json.dumps(figures))


def one_run(root: Path, backend: str, csv_path: Path, profile: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-import-ab-") as tmp:
        workdir = Path(tmp)
        drop = None
        if backend == "sqlite":
            url = f"sqlite:///{workdir / 'ab.db'}"
        else:
            import psycopg

            name = f"broadside_bench_ab_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"

            def drop() -> None:
                with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        try:
            env = {**os.environ, "PYTHONPATH": str(root)}
            command = [sys.executable, str(HERE / "import_ab.py"), "--child", str(workdir), url,
                       str(csv_path)] + (["--profile", profile] if profile else [])
            result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=root,
                                    check=False)
            if result.returncode != 0:
                raise RuntimeError(result.stderr[-3000:])
            return json.loads(result.stdout.strip().splitlines()[-1])
        finally:
            if drop:
                drop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the checkout to compare with")
    parser.add_argument("--new", type=Path, default=ROOT)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--profile", help="cProfile the first import of each run into PREFIX-<a|b>")
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1], Path(args.child[2]), args.profile)
        return 0
    sys.path.insert(0, str(HERE))
    from million_import import generate

    with tempfile.TemporaryDirectory(prefix="bench-import-ab-csv-") as tmp:
        csv_path = Path(tmp) / "ab.csv"
        generate(csv_path, args.rows)
        runs: dict[str, list[dict]] = {"a": [], "b": []}
        for round_ in range(args.rounds):
            order = ("a", "b") if round_ % 2 == 0 else ("b", "a")
            for side in order:
                root = args.base if side == "a" else args.new
                profile = f"{args.profile}-{side}" if args.profile else None
                figures = one_run(root, args.backend, csv_path, profile)
                runs[side].append(figures)
                print(f"{side} ({root}): first {figures['first']:.2f} s, again "
                      f"{figures['again']:.2f} s, peak {figures['peak_mb']:.0f} MB, "
                      f"{figures['first_counts']} / {figures['again_counts']}, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    for key in ("first", "again"):
        a = statistics.median(r[key] for r in runs["a"])
        b = statistics.median(r[key] for r in runs["b"])
        print(f"{args.backend} {args.rows:,} rows, {key}: base {a:.2f} s, new {b:.2f} s, "
              f"new/base {b / a:.2f}")
    same = all(r["first_counts"] == runs["a"][0]["first_counts"]
               and r["again_counts"] == runs["a"][0]["again_counts"]
               for r in runs["a"] + runs["b"])
    print("counts identical" if same else "COUNTS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
