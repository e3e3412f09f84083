"""A store is a context manager that closes itself (``with open_store(path) as store: ...``), as
the ``KnowledgeStore`` protocol says; every store inherits this and overrides ``close`` when it
holds something to release."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class ClosingStore:
    def close(self) -> None:
        """Nothing to release (a store over a pool it does not own, or over dicts)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
