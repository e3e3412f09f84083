"""The knowledge-store protocol: what any store (embedded SQLite, PostgreSQL + pgvector) offers.

Nothing here mentions SQLite: ids are opaque strings, time is an aware ``datetime``, and
search returns ranked ``SearchHit`` values whose ``score`` is "higher is better" for that
store. Semantics every implementation must share:

- **deliverable** (D6): not rejected, not expired (``expires_at <= now``), not invalidated.
- **include_superseded** (D7): additionally admits rows invalidated *by supersession*
  (``superseded_by:<id>``). Rejected, expired and otherwise-invalidated rows stay excluded.
- **namespaces**: an allow-list of scopes; ``None`` means no scope filter, ``[]`` matches nothing.
- **delivery_policy="retrieved"** also matches NULL (NULL means retrieved).
- **occurred_after / occurred_before**: rows whose event time (``occurred_at``) lies in that
  half-open window ``[after, before)``; a row without an event time is in no window.

``MemoryHistory`` is the second half of the contract (ADR D7 made checkable): the append-only
lifecycle history of every row and the as-of reads it allows. It is a protocol of its own so
a store written before it still type-checks as a ``KnowledgeStore``; the conformance kit
requires both of every store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

import attrs

from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import MemoryChunk


@attrs.frozen
class SearchHit:
    """One ranked search result. ``rank`` 1 is the best; ``score`` is higher-is-better.

    ``relevance`` is how well the row answers the query on a fixed scale, [0, 1], the same at
    any store size: the embedded store gives the IDF-weighted share of the query's meaningful
    terms the row matches, or the vector relevance, whichever is higher: the cosine similarity
    of the embeddings measured from what the best unrelated row reaches by chance in that
    store (``vector_index.chance_similarity``) to 1.
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
        occurred_at: datetime | str | None = None,
    ) -> str:
        """Store one row, stamped per D7; return its id (domain/source_type may be positional).
        ``occurred_at``: the event time (when what it describes happened), not the write time."""
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
        occurred_after: datetime | str | None = None,
        occurred_before: datetime | str | None = None,
        offset: int = 0,
    ) -> list[MemoryChunk]:
        """Rows matching every filter, oldest first: at most ``limit`` from the ``offset``-th.
        (``count_chunks``, with the same filters, is optional: a store may offer it.)"""
        ...

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        deliverable: bool = True,
        namespaces: Sequence[str] | None = None,
        include_superseded: bool = False,
        now: datetime | None = None,
        occurred_after: datetime | str | None = None,
        occurred_before: datetime | str | None = None,
    ) -> list[SearchHit]: ...

    def set_review_state(self, chunk_id: str, state: str, *, by: str = "") -> MemoryChunk:
        """Confirm, reject or reset to pending; ``by`` (who) is kept in the history."""
        ...

    def set_expires_at(
        self, chunk_id: str, expires_at: datetime | str | None, *, by: str = ""
    ) -> MemoryChunk: ...

    def invalidate_chunk(
        self,
        chunk_id: str,
        *,
        superseded_by: str | None = None,
        reason: str | None = None,
        by: str = "",
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


@runtime_checkable
class AsyncKnowledgeStore(KnowledgeStore, Protocol):
    """A ``KnowledgeStore`` that also offers, for event loops, what composition and the memory
    tools use: each returns what its synchronous twin returns, without blocking the loop.

    Why a protocol of its own and not five more methods on ``KnowledgeStore``: every store
    written against ``KnowledgeStore`` would stop satisfying it. ``contextplane.store.aio``
    calls these when a store has them and runs the synchronous method in a worker thread when
    it does not, so every store works on the async path and a store with a native async client
    (PostgreSQL) is not made to hop threads. A store's ``consistent_read()`` view offers
    ``asearch`` / ``alist_chunks`` too when the store does (reads through the view, never
    around it). The store conformance kit checks each against its twin (STORE-ASYNC-PARITY)."""

    async def asearch(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]: ...

    async def alist_chunks(self, **filters: Any) -> list[MemoryChunk]: ...

    async def aadd_chunk(self, content: str, *args: Any, **attrs: Any) -> str: ...

    async def asupersede(self, old_id: str, content: str, **attrs: Any) -> str: ...

    async def aset_review_state(self, chunk_id: str, state: str) -> MemoryChunk: ...


@runtime_checkable
class MemoryHistory(Protocol):
    """The lifecycle history a store keeps, and the as-of reads it answers (ADR D6/D7 over time).

    - ``history(id)``: every event of the row, oldest first, each with the row's lifecycle
      state after it; appended in the same transaction as the change, never rewritten, kept
      after a purge (the last event is ``purged``).
    - ``history_position()``: where the history stands now. A ``consistent_read()`` view has
      the same method: the position of the state it reads (what a composition records).
    - ``as_of(position or aware datetime)``: a read view (``get``, ``list_chunks``,
      ``search``, ``consistent_read``, ``history_position``) of the store at that point: rows
      written later are invisible, each row has the lifecycle state it had then, and
      ``deliverable`` is evaluated at the position's time. A time before the history starts
      (a migrated store) raises ``StoreError``.
    """

    def history(self, chunk_id: str) -> list[HistoryEvent]: ...

    def history_position(self) -> HistoryPosition: ...

    def as_of(self, when: HistoryPosition | datetime) -> AbstractContextManager[Any]: ...


@runtime_checkable
class StoreCheck(Protocol):
    """A store that can check itself (``contextplane store check``): one line per problem
    found (its integrity, every row's history, its vector index), empty when all is well.
    Optional: a backend whose store has no such method is reported as not checkable."""

    def check(self) -> list[str]: ...


@attrs.frozen
class LegRank:
    """Where one row stood in one retrieval leg for one query (``SearchTrace``)."""

    #: "fts", "vector", or the store's own name for a leg ("overlap" for word overlap).
    leg: str
    #: Its rank among every candidate of the leg, before any filter (None: not a candidate:
    #: no query word occurs in it, or its vector was not among those scanned).
    rank: int | None
    #: How many candidates the leg had (full-text matches, vectors scanned).
    candidates: int
    #: How many candidates the leg keeps before filtering (its cut-off).
    cutoff: int
    #: Its rank among the candidates that pass the search's scope and deliverable filters.
    filtered_rank: int | None = None
    note: str = ""


@attrs.frozen
class SearchTrace:
    """How one row fared in one ``search`` call: where it ranked in each leg, and in the final
    list the ``k`` results are cut from (what ``explain`` reports as "never retrieved")."""

    query: str
    k: int
    #: Which statement produced the results: "fast" (legs cut before filtering) or "exact".
    form: str
    #: Its rank in the final (fused, filtered) list; None when it is not in it at all.
    rank: int | None
    #: The ids ``search`` returned, best first.
    results: tuple[str, ...]
    legs: tuple[LegRank, ...] = ()


@runtime_checkable
class FollowingReads(Protocol):
    """Optional: a store that can say which memory was written right after another in its scope
    (all three built-in stores can). The retrieved section offers that memory beside a hit
    (``context.retrieved_follow``): in a conversation the turn that matches a question best is
    often the one that asks or echoes it, and the answer is the turn after it.

    ``following(ids)`` maps each id to the first memory written after it (write order: a
    store's ids ascend as rows are written) in the same scope (``namespace``) from the same
    source (``source_type`` and ``source``: the same conversation, not a note extracted from
    it or a row another writer put in between), deliverable at
    ``now`` when ``deliverable`` (D6: not rejected, expired or invalidated; an undeliverable row
    is stepped over, not returned). An id naming no row, or with no such row after it, is
    absent from the result. A point-in-time view answers as of its position."""

    def following(
        self,
        chunk_ids: Sequence[str],
        *,
        deliverable: bool = True,
        now: datetime | None = None,
    ) -> dict[str, MemoryChunk]: ...


@runtime_checkable
class SearchTracer(Protocol):
    """Optional: a store that can say where a row ranked for a query (both built-in stores do)."""

    def trace_search(
        self,
        query: str,
        chunk_id: str,
        k: int = 10,
        *,
        namespaces: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> SearchTrace: ...


@runtime_checkable
class ExactRestore(Protocol):
    """Optional: a store that can put exported rows back exactly (``contextplane memory
    import``; ``contextplane.store.restore`` says what every such store keeps).

    ``restore_chunks(rows)`` inserts each row (a mapping of ``MemoryChunk`` attributes, as
    ``memory export`` writes them, or a ``MemoryChunk``) with its id, times and lifecycle state
    as given, nothing consolidated or stamped; keeps the full-text index, vectors and caches as a
    write does; gives each row one ``created`` event at the restore's time whose detail says it
    was restored; refuses an id the store holds, naming it; writes all rows or none. Returns the
    ids, in the order given. The store kit checks it (STORE-RESTORE-EXACT, capability
    ``exact_restore``); a store without it is imported with new ids."""

    def restore_chunks(
        self, rows: Iterable[Mapping[str, Any] | MemoryChunk], *, by: str = ""
    ) -> list[str]: ...
