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
    # A finding that does not stop sending (a DNS record missing): shown with "!", not counted
    # as a failed check, so `doctor` still exits 0.
    warning: bool = False

    def line(self) -> str:
        mark = "!" if self.warning and not self.ok else {True: "✓", False: "✗", None: "?"}[self.ok]
        text = f"{mark} {self.name}: {self.summary}"
        return f"{text} → {self.advice}" if self.advice and not self.ok else text
