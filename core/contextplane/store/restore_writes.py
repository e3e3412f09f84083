"""The embedded store's exact restore (``ExactRestore``; ``store.restore`` says what it keeps).

How it fits the history's layout (``store.history``): the rows go in with their own ids, one
``chunk_log`` 'created' entry per run of consecutive ids (a log entry names an id range, and
``count_events`` / ``walk_events`` read one event per id of it), every row carrying its run's
``created_seq`` and, as its first history entry, the ``created`` event that says it was
restored. As-of reads hide "rows written after a position" as the ids above the last batch
logged by then, which holds only while ids are handed out in increasing order; so a restored
id must be above every id this store has handed out (a fresh store takes any export), and an
id below is refused by name. ``AUTOINCREMENT`` then continues after the largest restored id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from contextplane.embedding import refused_write
from contextplane.errors import StoreError
from contextplane.memory.consolidation import content_hash
from contextplane.memory.model import MemoryChunk, format_timestamp, utc_now, validate_text
from contextplane.store import history, migrate, restore, vector_index
from contextplane.store.columns import COLUMN_NAMES
from contextplane.store.lifecycle import StoreLifecycle
from contextplane.store.row_codec import chunk_cells

#: A restored row: the chunk's cells in table order (the shared row codec), then the columns
#: only this store keeps.
_COLUMNS: Final[tuple[str, ...]] = (*COLUMN_NAMES, "content_hash", "created_seq", "history")
_NAMES: Final[str] = ", ".join(_COLUMNS)
#: Rows go through a temporary table, then into ``chunks`` in one statement, as a bulk write's
#: do (``columns.STAGE_SQL``: FTS5 flushes its pending index at every statement boundary, and
#: inserting row by row made a 20,000-row restore 4x slower than the same write).
_STAGING_SQL: Final[str] = f"CREATE TEMP TABLE IF NOT EXISTS restore_staging({_NAMES})"
_STAGE_SQL: Final[str] = f"INSERT INTO temp.restore_staging VALUES ({', '.join('?' for _ in _COLUMNS)})"
_RESTORE_SQL: Final[str] = (
    f"INSERT INTO chunks({_NAMES}) SELECT {_NAMES} FROM temp.restore_staging ORDER BY id"
)
_UNSTAGE_SQL: Final[str] = "DELETE FROM temp.restore_staging"
#: The largest id this store has handed out: live, purged (``chunk_gone``) or counted by
#: ``AUTOINCREMENT``.
_HIGH_SQL: Final[str] = (
    "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0), "
    "coalesce((SELECT max(id) FROM chunks), 0), coalesce((SELECT max(chunk_id) FROM chunk_gone), 0))"
)


def _same(value: Any) -> Any:
    return value


def _runs(ids: list[int]) -> list[range]:
    """Sorted ids as runs of consecutive ids."""
    runs: list[range] = []
    start = previous = ids[0]
    for chunk_id in ids[1:]:
        if chunk_id != previous + 1:
            runs.append(range(start, previous + 1))
            start = chunk_id
        previous = chunk_id
    runs.append(range(start, previous + 1))
    return runs


class StoreRestore(StoreLifecycle):
    """``restore_chunks``: exported rows back with their ids, times and state."""

    def restore_chunks(self, rows: Iterable[Mapping[str, Any] | MemoryChunk], *, by: str = "") -> list[str]:
        """Insert rows exactly as given (see ``contextplane.store.restore``), embedded through
        the store's embedder, in one transaction; return their ids in the order given."""
        chunks = restore.restored_chunks(rows)
        if not chunks:
            return []
        by = validate_text(by, "by")
        with refused_write():
            vectors = self._embed([c.content for c in chunks]) if self._embedder is not None else None
        ordered = sorted(range(len(chunks)), key=lambda i: int(chunks[i].id))
        now = utc_now()
        now_text = format_timestamp(now)
        details = restore.created_details(chunks, now, by)
        with self._writing() as conn:
            self._refuse_taken(conn, [c.id for c in chunks])
            seqs: dict[int, int] = {}
            for run in _runs([int(chunks[i].id) for i in ordered]):
                seq = history.log_created(conn, run, now_text)
                seqs.update((chunk_id, seq) for chunk_id in run)
            staged = []
            for index in ordered:
                c = chunks[index]
                seq = seqs[int(c.id)]
                entry = [seq, now_text, "created", c.source_type, details[c.id], *([None] * 5)]
                cells = chunk_cells(c, COLUMN_NAMES, _same, format_timestamp)
                history_text = json.dumps(entry, ensure_ascii=False) + "\n"
                staged.append((*cells, content_hash(c.content), seq, history_text))
            conn.execute(_STAGING_SQL)
            conn.executemany(_STAGE_SQL, staged)
            conn.execute(_RESTORE_SQL)
            conn.execute(_UNSTAGE_SQL)
            if vectors is not None:
                assert self._embedder is not None
                vector_index.require_space(conn, self.path, self._embedder)
                vector_index.add_vectors(conn, ((int(c.id), v) for c, v in zip(chunks, vectors, strict=True)))
        self._maybe_train()
        with self._lock:
            migrate.maybe_analyze(self.conn)
        return [c.id for c in chunks]

    def _refuse_taken(self, conn: Any, ids: list[str]) -> None:
        """An id this store holds, held (purged) or has handed out past is refused by name."""
        listed = json.dumps([int(i) for i in ids])
        for table, column, purged in (("chunks", "id", False), ("chunk_gone", "chunk_id", True)):
            row = conn.execute(
                f"SELECT min({column}) FROM {table} WHERE {column} IN (SELECT value FROM json_each(?))",
                (listed,),
            ).fetchone()
            if row is not None and row[0] is not None:
                raise restore.id_taken(self.path, str(row[0]), purged=purged)
        high = int(migrate.scalar(conn, _HIGH_SQL))
        low = min(int(i) for i in ids)
        if low <= high:
            raise StoreError(
                f"{self.path}: memory {low} is not above the largest id this store has handed out ({high}); "
                "its as-of reads need ids in the order rows arrived, so restore into a fresh store, or "
                "import with new ids (`contextplane memory import --new-ids`); nothing was restored"
            )
