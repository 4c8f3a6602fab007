"""Figures, their targets, the printed table, the JSON file and the machine they ran on."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Figure:
    area: str
    name: str
    value: float | None
    unit: str
    target: str = ""  # "" = shown for information, no target stated in the issues
    ok: bool | None = None  # None = no target (or not measured)
    detail: str = ""
    missing: bool = False  # the thing to measure does not exist in this checkout
    extra: dict = field(default_factory=dict)  # finer figures, kept in the JSON only
    error: bool = False  # the benchmark itself crashed (the detail says how)

    @property
    def result(self) -> str:
        if self.error:
            return "ERROR"
        if self.missing:
            return "N/A"
        if self.ok is None:
            return "info"
        return "PASS" if self.ok else "FAIL"

    def shown(self) -> str:
        if self.value is None:
            return "-"
        if self.unit == "ratio":
            return f"{self.value:.2f}"
        if self.unit in ("msg/s", "rows/s"):
            return f"{self.value:,.0f} {self.unit}"
        if self.unit == "ms":
            return f"{self.value:.1f} ms" if self.value < 100 else f"{self.value:,.0f} ms"
        if self.unit == "s":
            return f"{self.value:.2f} s"
        if self.unit == "MB":
            return f"{self.value:.1f} MB"
        return f"{self.value:g} {self.unit}".strip()


def at_least(value: float, limit: float) -> bool:
    return value >= limit


def below(value: float, limit: float) -> bool:
    return value < limit


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank on the sorted values (the same rule as bench/subscriber_table.py)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def median(values: list[float]) -> float:
    return statistics.median(values)


def table(figures: list[Figure]) -> str:
    headers = ("area", "figure", "value", "target", "result")
    rows = [(f.area, f.name, f.shown(), f.target or "-", f.result) for f in figures]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*headers), line.format(*("-" * w for w in widths))]
    for figure, row in zip(figures, rows, strict=True):
        out.append(line.format(*row))
        if figure.detail:
            out.append(" " * (widths[0] + 2) + "  " + figure.detail)
    return "\n".join(out)


def markdown_table(figures: list[Figure]) -> str:
    out = ["| area | figure | value | target | result | how it was seen |", "|---|---|---|---|---|---|"]
    for f in figures:
        detail = f.detail.replace("|", "\\|")
        out.append(f"| {f.area} | {f.name} | {f.shown()} | {f.target or '-'} | {f.result} | {detail} |")
    return "\n".join(out)


def as_json(figures: list[Figure]) -> list[dict]:
    return [{**asdict(f), "result": f.result, "shown": f.shown()} for f in figures]


def machine() -> dict:
    info: dict = {
        "cpu": "unknown",
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "kernel": platform.release(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["ram_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        import psycopg
        from harness import POSTGRES_URL

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            info["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    except Exception as exc:
        info["postgresql"] = f"unreachable ({exc.__class__.__name__})"
    try:
        from harness import REDIS_URL
        from redis import Redis

        client = Redis.from_url(REDIS_URL)
        info["redis"] = client.info("server")["redis_version"]
        client.close()
    except Exception as exc:
        info["redis"] = f"unreachable ({exc.__class__.__name__})"
    return info


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
