"""The knowledge-store protocol: what any store (embedded SQLite, PostgreSQL + pgvector) offers.

Nothing here mentions SQLite: ids are opaque strings, time is an aware ``datetime``, and
search returns ranked ``SearchHit`` values whose ``score`` is "higher is better" for that
store. Semantics every implementation must share:

- **deliverable** (D6): not rejected, not expired (``expires_at <= now``), not invalidated.
- **include_superseded** (D7): additionally admits rows invalidated *by supersession*
  (``superseded_by:<id>``). Rejected, expired and otherwise-invalidated rows stay excluded.
- **namespaces**: an allow-list of scopes; ``None`` means no scope filter, ``[]`` matches nothing.
- **delivery_policy="retrieved"** also matches NULL (NULL means retrieved).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

import attrs

from contextplane.memory.model import MemoryChunk


@attrs.frozen
class SearchHit:
    """One ranked search result. ``rank`` 1 is the best; ``score`` is higher-is-better.

    ``relevance`` is how well the row answers the query on a fixed scale, [0, 1], the same at
    any store size: the embedded store gives the IDF-weighted share of the query's meaningful
    terms the row matches, or the cosine similarity of the embeddings, whichever is higher.
    The retrieved section injects no row below ``context.min_relevance``. ``None`` (a store
    that cannot say) is never filtered."""

    chunk: MemoryChunk
    score: float
    rank: int
    relevance: float | None = None


@runtime_checkable
class KnowledgeStore(Protocol):
    """Typed memory storage with the D7 write lifecycle and D6 deliverable filtering."""

    def add_chunk(
        self,
        content: str,
        domain: str = "general",
        source_type: str = "",
        *,
        memory_kind: str | None = None,
        delivery_policy: str | None = None,
        review_state: str | None = None,
        namespace: str = "",
        heading: str = "",
        source: str = "",
        subject: str = "",
        epoch: str = "",
        expires_at: datetime | str | None = None,
        expires_in_days: int | None = None,
    ) -> str:
        """Store one row, stamped per D7; return its id (domain/source_type may be positional)."""
        ...

    def add_chunks(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Bulk insert: each mapping holds ``add_chunk`` keywords (``content`` required)."""
        ...

    def get(self, chunk_id: str) -> MemoryChunk | None: ...

    def list_chunks(
        self,
        *,
        deliverable: bool = False,
        memory_kind: str | None = None,
        review_state: str | None = None,
        delivery_policy: str | None = None,
        namespace: str | None = None,
        namespaces: Sequence[str] | None = None,
        limit: int | None = None,
        now: datetime | None = None,
    ) -> list[MemoryChunk]: ...

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        deliverable: bool = True,
        namespaces: Sequence[str] | None = None,
        include_superseded: bool = False,
        now: datetime | None = None,
    ) -> list[SearchHit]: ...

    def set_review_state(self, chunk_id: str, state: str) -> MemoryChunk: ...

    def set_expires_at(self, chunk_id: str, expires_at: datetime | str | None) -> MemoryChunk: ...

    def invalidate_chunk(
        self, chunk_id: str, *, superseded_by: str | None = None, reason: str | None = None
    ) -> MemoryChunk: ...

    def supersede(self, old_id: str, content: str, **attrs: Any) -> str: ...

    def purge(self, now: datetime | None = None) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
