"""As-of overlays: the embedded store's state at a past position, shadowing ``chunks`` (and, for
exact ranking, ``chunks_fts``) on a view's own connection (see ``history``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import apsw

from contextplane.memory.history import (
    HistoryPosition,
)
from contextplane.store import migrate
from contextplane.store.columns import SELECT_NAMES
from contextplane.store.connection import temp_objects
from contextplane.store.history_read import _Baseline, _entries, _row_events, _rows
from contextplane.store.history_spec import STATE_COLUMNS, AsOfOverlay


def fts_tokenizer(conn: apsw.Connection) -> str:
    """The ``tokenize=`` argument of the store's full-text index, quoted as in its SQL."""
    sql = str(migrate.scalar(conn, "SELECT sql FROM main.sqlite_master WHERE name = 'chunks_fts'"))
    found = re.search(r"tokenize\s*=\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")", sql)
    return found.group(1) if found else "'unicode61'"


def _view_sql(high: int) -> str:
    columns = []
    for name in SELECT_NAMES:
        if name in STATE_COLUMNS:
            columns.append(f"CASE WHEN o.id IS NULL THEN m.{name} ELSE o.{name} END AS {name}")
        else:
            columns.append(f"m.{name} AS {name}")
    return (
        f"CREATE TEMP VIEW chunks AS SELECT {', '.join(columns)} FROM main.chunks AS m "
        "LEFT JOIN temp.asof_state AS o ON o.id = m.id "
        f"WHERE m.id <= {int(high)} AND (o.id IS NULL OR o.present)"
    )


def _high_at(conn: apsw.Connection, seq: int) -> int:
    """The largest id written at or before ``seq``: ids are handed out in order under the write
    lock, so every row above it was written later."""
    row = conn.execute(
        "SELECT coalesce(last_id, chunk_id) FROM chunk_log WHERE kind = 'created' AND seq <= ? "
        "ORDER BY seq DESC LIMIT 1",
        (seq,),
    ).fetchone()
    if row is not None:
        return int(row[0])
    high = migrate.meta_get(conn, migrate.HISTORY_BASELINE_KEY)
    return int(high) if high is not None else 0


def overlay(conn: apsw.Connection, position: HistoryPosition, *, exact_ranking: bool) -> AsOfOverlay:
    """Shadow ``chunks`` (and, for exact ranking when the corpus changed, ``chunks_fts``) on
    ``conn`` with the store's state at ``position``. ``conn`` must be private to the view and
    inside its read transaction; its temporary objects die with it."""
    later: list[Sequence[Any]] = list(
        conn.execute(
            "SELECT chunk_id, coalesce(last_id, chunk_id), kind FROM chunk_log WHERE seq > ? ORDER BY seq",
            (position.seq,),
        )
    )
    if not later:
        return AsOfOverlay(position)
    written: list[int] = []
    touched: set[int] = set()
    for first, last, kind in later:
        if kind == "created":
            written.extend(range(int(first), int(last) + 1))
        else:
            touched.add(int(first))
    new = set(written)
    baseline = _Baseline.read(conn)
    rows: list[tuple[Any, ...]] = []
    purged: list[str] = []
    for row in _rows(conn, sorted(touched - new)):
        entries = _entries(row)
        found = _row_events(row, baseline, entries)
        then = [e for e in found if e.seq <= position.seq]
        if not then:  # no event by then: a row of an older store written without one
            continue
        state = then[-1]
        gone = any(e.event == "purged" for e in found)
        if gone and state.event != "purged":
            purged.append(str(row[0]))
        index = len(then)
        cells = tuple(row[5:10]) if index == len(found) or (gone and index == len(found) - 1) else None
        if cells is None:  # the next event's entry holds the cells before it: the state then
            cells = next(tuple(e[5:10]) for e in entries if e[2] != "created" and e[0] == found[index].seq)
        rows.append((int(row[0]), int(state.event != "purged"), *cells))
    high = _high_at(conn, position.seq)
    corpus_changed = bool(written or purged)
    tokenize = fts_tokenizer(conn) if exact_ranking and corpus_changed else None
    with temp_objects(conn):
        conn.execute(
            "CREATE TEMP TABLE asof_state (id INTEGER PRIMARY KEY, present INTEGER NOT NULL, "
            + ", ".join(f"{c} TEXT" for c in STATE_COLUMNS)
            + ")"
        )
        conn.executemany("INSERT INTO temp.asof_state VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute(_view_sql(high))
        if tokenize is not None:
            # Over the view of the past (``temp.chunks``), built by one 'rebuild': unlike
            # inserted rows, which FTS5 holds in memory until a commit this read never makes, a
            # rebuild writes the index's row count and averages, which the query plan's term
            # weights read (``query_terms.indexed_rows``); without them every hit's relevance
            # was 1.0.
            conn.execute(
                "CREATE VIRTUAL TABLE temp.chunks_fts USING fts5(content, heading, content='chunks', "
                f"content_rowid='id', tokenize={tokenize})"
            )
            conn.execute("INSERT INTO temp.chunks_fts(chunks_fts) VALUES ('rebuild')")
    return AsOfOverlay(
        position,
        changed=tuple(str(i) for i in sorted(touched | new)),
        written_after=tuple(str(i) for i in written),
        purged_after=tuple(purged),
        exact_ranking=exact_ranking or not corpus_changed,
    )


def drop_overlay(conn: apsw.Connection) -> None:
    """Remove an overlay's temporary objects, so the connection reads the present again."""
    with temp_objects(conn):
        for statement in (
            "DROP VIEW IF EXISTS temp.chunks",
            "DROP TABLE IF EXISTS temp.chunks_fts",
            "DROP TABLE IF EXISTS temp.asof_state",
        ):
            conn.execute(statement)
