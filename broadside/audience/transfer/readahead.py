"""An iterator's items made in a thread, one ahead of the caller: the import reads and checks
its file's next batch while the database writes the one before."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class ReadAhead(Generic[T]):
    """An iterator's items made in a thread, one ahead of the caller; an exception it raises
    is raised in the caller, in its place. Leaving the `with` block (at the end, or early,
    on an error) stops the thread before returning."""

    _DONE = object()

    def __init__(self, items: Iterator[T]) -> None:
        self._items = items
        self._queue: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="import-reader", daemon=True)

    def _offer(self, entry: tuple[Any, BaseException | None]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._items:
                if not self._offer((item, None)):
                    return
        except BaseException as exc:  # handed to the caller, raised there
            self._offer((self._DONE, exc))
            return
        finally:
            # A generator is closed in the thread that runs it (its file with it), whether
            # it ended or was left early.
            close = getattr(self._items, "close", None)
            if close is not None:
                close()
        self._offer((self._DONE, None))

    def __enter__(self) -> Iterator[T]:
        self._thread.start()
        return self._consume()

    def _consume(self) -> Iterator[T]:
        while True:
            item, error = self._queue.get()
            if error is not None:
                raise error
            if item is self._DONE:
                return
            yield item

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
