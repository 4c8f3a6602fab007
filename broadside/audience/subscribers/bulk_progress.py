"""How far a bulk action got, in the owner's words: the progress page, polled while the worker
works (`broadside.audience.subscribers.bulk` does the work; this only reads its row)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from broadside.audience.subscribers.bulk import Plan, get, people
from broadside.core.models import BulkAction


@dataclass
class Progress:
    record: BulkAction

    @property
    def finished(self) -> bool:
        return self.record.status in ("done", "failed")

    @property
    def percent(self) -> int:
        if self.record.status == "done":
            return 100
        if not self.record.total:
            return 0
        return min(99, int(100 * self.record.processed / self.record.total))

    @property
    def headline(self) -> str:
        r = self.record
        return Plan(r.action, r.list_id, r.list_name, None, None, r.max_id, r.total).headline

    @property
    def acted_on(self) -> int:
        """Of those gone through, the people it acted on (still matching when reached)."""
        return self.record.processed - self.record.no_longer_matched

    @property
    def already_so(self) -> int:
        return self.acted_on - self.record.changed

    @property
    def left_alone(self) -> str:
        """The sentence for the people of the set it left alone ("" when none)."""
        count = self.record.no_longer_matched
        if not count:
            return ""
        were = "was" if count == 1 else "were"
        if self.record.subscriber_ids is not None:
            return f"{people(count)} {were} no longer there and {were} left alone."
        return f"{people(count)} no longer matched the filter and {were} left alone."


def progress(session: Session, bulk_id: int) -> Progress:
    return Progress(get(session, bulk_id))
