"""The lifecycle spec every memory store shares (ADR D7): ``invalidate_chunk``'s keywords written
once (``ChunkLifecycle``), over a store's own ``_invalidate_chunk``.

Why: the embedded, PostgreSQL and in-memory stores each wrote the signature out beside the
protocol's, as ``add_chunk``'s was before the write spec. The ``KnowledgeStore`` protocol states
it as the contract; a test keeps the two equal. Backend authors import it from
``contextplane.backends.spec``.
"""

from __future__ import annotations

from contextplane.memory.model import MemoryChunk


class ChunkLifecycle:
    def invalidate_chunk(
        self,
        chunk_id: str,
        *,
        superseded_by: str | None = None,
        reason: str | None = None,
        by: str = "",
    ) -> MemoryChunk:
        """Stamp ``invalidated_at`` and a reason; ``superseded_by`` records ``superseded_by:<id>``.
        The row is kept for audit (D7); only ``purge`` ever deletes, and never a superseded row.
        ``by`` (who) is kept in the history."""
        return self._invalidate_chunk(chunk_id, superseded_by, reason, by)

    def _invalidate_chunk(
        self, chunk_id: str, superseded_by: str | None, reason: str | None, by: str
    ) -> MemoryChunk:
        raise NotImplementedError
