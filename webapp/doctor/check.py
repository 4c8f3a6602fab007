"""One check's answer, as the CLI prints it and the System page shows it."""

from __future__ import annotations

from dataclasses import dataclass

CHECK_TIMEOUT_S = 4.0  # every network step of a check gives up after this


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: not known yet (the page's SMTP line before any check)
    summary: str
    advice: str = ""  # what to do, when it failed
    details: tuple[str, ...] = ()  # extra lines (the configuration values)

    def line(self) -> str:
        mark = {True: "✓", False: "✗", None: "?"}[self.ok]
        text = f"{mark} {self.name}: {self.summary}"
        return f"{text} → {self.advice}" if self.advice and not self.ok else text
