"""Test helpers for the store: a deterministic embedder and a version-1 store builder."""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw

from contextplane.store.migrate import V1_SCHEMA_SQL

_WORD = re.compile(r"[^\W_]+")


class HashEmbedder:
    """Hashed bag-of-words: texts sharing words get similar vectors. Deterministic across runs
    (blake2b, not ``hash``), so vector-leg results are reproducible."""

    def __init__(self, dimensions: int = 64, name: str = "test-hash-bow") -> None:
        self._dimensions = dimensions
        self._name = name
        self.calls = 0

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def name(self) -> str:
        return self._name

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        out = []
        for text in texts:
            vector = [0.0] * self._dimensions
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self._dimensions
                vector[index] += 1.0 if digest[4] & 1 else -1.0
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            out.append([x / norm for x in vector] if any(vector) else [1.0] + [0.0] * (self._dimensions - 1))
        return out


class FailingEmbedder(HashEmbedder):
    """Embeds normally until ``fail`` is set, then raises: a way to make an insert fail."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail:
            raise RuntimeError("embedding service unavailable")
        return super().embed(texts)


V1_ROW = tuple[str, str, str]  # (content, domain, source_type)


def make_v1_store(path: Path, rows: Iterable[tuple[str, str, str]], *, extra_sql: str = "") -> None:
    """Write a version-1 store (pre-D4 schema) holding ``rows``."""
    conn = apsw.Connection(str(path))
    conn.execute(V1_SCHEMA_SQL)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO chunks(content, domain, source_type, namespace, created_at, updated_at) "
        "VALUES (?, ?, ?, '', '2025-01-01T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z')",
        list(rows),
    )
    conn.execute("COMMIT")
    if extra_sql:
        conn.execute(extra_sql)
    conn.close()


#: (content, domain, source_type, memory_kind, delivery_policy, review_state, namespace, subject,
#:  expires_at, invalidated_at, invalidation_reason) of a version-2 row.
V2_ROW = tuple[str, str, str, str, str | None, str, str, str, str | None, str | None, str | None]


def make_v2_store(path: Path, rows: Iterable[V2_ROW]) -> None:
    """Write a version-2 store (typed memory, before the lifecycle history) holding ``rows``:
    the schema the v2 code created (the v2 table, its FTS index and triggers, both backfill
    markers), at ``PRAGMA user_version = 2``, with no ``chunk_history`` and no ``content_hash``."""
    from contextplane.store import migrate

    conn = apsw.Connection(str(path))
    conn.execute("BEGIN")
    conn.execute("CREATE TABLE _kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(migrate._CHUNKS_V2_SQL)
    migrate._ensure_fts(conn)
    for name in migrate.PASSES:
        conn.execute(
            "INSERT INTO _kb_meta(key, value) VALUES (?, 'fresh 2025-06-01T00:00:00.000000Z')", (name,)
        )
    conn.executemany(
        "INSERT INTO chunks(content, domain, source_type, memory_kind, delivery_policy, review_state, "
        "namespace, subject, expires_at, invalidated_at, invalidation_reason, created_at, updated_at) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?, '2025-06-01T00:00:00.000000Z', '2025-06-02T00:00:00.000000Z')",
        list(rows),
    )
    conn.execute("PRAGMA user_version = 2")
    conn.execute("COMMIT")
    conn.close()


@contextlib.contextmanager
def opened_store(kind: str, tmp_path: Path) -> Iterator[Any]:
    """The embedded store (a file under ``tmp_path``) or the in-memory one, by ``kind``: for
    tests that hold a behaviour to both."""
    from contextplane.store import SQLiteKnowledgeStore
    from contextplane.testing.memory import InMemoryKnowledgeStore

    if kind == "memory":
        yield InMemoryKnowledgeStore()
        return
    with SQLiteKnowledgeStore(tmp_path / "memory.sqlite3") as opened:
        yield opened
