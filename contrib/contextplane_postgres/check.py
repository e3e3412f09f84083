"""``contextplane store check`` on PostgreSQL: what the server cannot judge for itself.

Why not the pages: PostgreSQL checks its own storage (data checksums, ``amcheck``, which needs
a superuser to install and is an operator's tool, not an application role's), and a damaged
page there is the server's to report. What only contextplane can read is its own data: every
history event must read as an event, every row must have one, the vector column must have the
width the store recorded, and no index may be left invalid (a ``CREATE INDEX CONCURRENTLY``
that failed half-way leaves one that is kept up but never used).
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

from contextplane.memory.history import EVENT_NAMES
from contextplane_postgres import history as pg_history
from contextplane_postgres import schema as pg_schema

#: At most this many problems of one kind are listed.
MAX_PROBLEMS: Final[int] = 100
#: History rows read per query.
PAGE_ROWS: Final[int] = 5_000


def check(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """One line per problem found in ``schema``; empty when all is well."""
    problems: list[str] = []
    problems += _history(conn)
    problems += _vectors(conn, schema)
    problems += [
        f"index {name} is invalid (a build that failed half-way); drop it and run `contextplane store init`"
        for (name,) in conn.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT i.indisvalid",
            (schema,),
        )
    ]
    return problems


def _history(conn: psycopg.Connection[Any]) -> list[str]:
    problems: list[str] = []
    after: tuple[int, int] = (-(2**63), -(2**63))
    while len(problems) < MAX_PROBLEMS:  # in pages by key: any size of history, bounded memory
        rows = conn.execute(
            f"SELECT {pg_history.EVENT_COLUMNS} FROM chunk_history WHERE (chunk_id, seq) > (%s, %s) "
            f"ORDER BY chunk_id, seq LIMIT {PAGE_ROWS}",
            (after[1], after[0]),
        ).fetchall()
        for row in rows:
            try:
                pg_history.read_event(row)
                if row[3] not in EVENT_NAMES:
                    raise ValueError(f"{row[3]!r} is not an event")
            except (ValueError, TypeError, AttributeError) as exc:
                problems.append(
                    f"history of memory {row[1]}: event {row[0]} is unreadable ({type(exc).__name__}: {exc})"
                )
        if len(rows) < PAGE_ROWS:
            break
        after = (int(rows[-1][0]), int(rows[-1][1]))
    problems += [
        f"memory {chunk_id} has no history event (its creation was never recorded)"
        for (chunk_id,) in conn.execute(
            "SELECT c.id FROM chunks AS c WHERE NOT EXISTS "
            f"(SELECT 1 FROM chunk_history AS h WHERE h.chunk_id = c.id) ORDER BY c.id LIMIT {MAX_PROBLEMS}"
        )
    ]
    return problems


def _vectors(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    dims, name = pg_schema.vector_state(conn)
    if dims is None:
        return []
    row = conn.execute(
        "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute AS a "
        "WHERE a.attrelid = format('%%I.chunks', %s::text)::regclass AND a.attname = 'embedding' "
        "AND NOT a.attisdropped",
        (schema,),
    ).fetchone()
    recorded = f"the store records {dims}-dimension vectors (embedder {name!r})"
    if row is None:
        return [f"{recorded}, but chunks has no embedding column"]
    if row[0] != f"vector({dims})":
        return [f"{recorded}, but the embedding column is {row[0]}"]
    index = conn.execute(
        "SELECT 1 FROM pg_indexes WHERE schemaname = %s AND indexname = 'chunks_embedding'", (schema,)
    ).fetchone()
    if index is None:
        return ["the vector index chunks_embedding is missing; every vector search scans every row"]
    return []
