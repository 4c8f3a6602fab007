"""The map tells the truth (docs/ARCHITECTURE.md): every file or folder of the repository it
names exists, and every module under broadside/ and jobs/ is named on it, so a newcomer who
follows it finds the thing and a module nobody mapped fails here. The README and
docs/SECURITY.md cite tests and modules as proof: those paths must exist too."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
PAGES = ("docs/ARCHITECTURE.md", "README.md", "docs/SECURITY.md", "BENCHMARKS.md")
WRITTEN_BY_A_RUN = {"bench/results/latest.json"}  # git-ignored: a benchmark run writes it
TOPS = ("broadside", "jobs", "webapp", "tests", "templates", "bench", "migrations", "static")


def named_paths(text: str) -> set[str]:
    """Repository paths written whole anywhere on a page (`jobs/engine.py`,
    `broadside/delivery/lease.py`, `jobs/runtime.py:LeasedPacer`, `webapp/doctor/`)."""
    found = re.findall(rf"(?<![\w/.-])((?:{'|'.join(TOPS)})/[\w/.-]*[\w/])", text)
    return {p.split(":")[0] for p in found if "<" not in p}


def test_every_path_the_pages_name_exists():
    missing = {page: sorted(p for p in named_paths((ROOT / page).read_text())
                            if not (ROOT / p).exists() and p not in WRITTEN_BY_A_RUN)
               for page in PAGES}
    missing = {page: paths for page, paths in missing.items() if paths}
    assert not missing, f"pages that name paths that do not exist: {missing}"


def test_every_domain_and_worker_module_is_on_the_map():
    # The map's tree writes a module by its file name under its folder, so a file name
    # (or its folder's name, for a package) must appear on the page.
    unnamed = sorted(
        path.relative_to(ROOT).as_posix()
        for top in ("broadside", "jobs") for path in (ROOT / top).rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
        and not re.search(rf"(?<![\w]){re.escape(path.name)}", MAP))
    assert not unnamed, f"modules docs/ARCHITECTURE.md does not name: {unnamed}"
