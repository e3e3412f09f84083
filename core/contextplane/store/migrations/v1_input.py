"""The version-1 input: what a store before schema 2 may look like, and bringing its ``chunks``
table to the v2 shape (or refusing it, with nothing changed) before the v2 columns are added.

A version-1 store is whatever the ADR's system wrote: not always ``V1_SCHEMA_SQL``. Some
versions had no ``subject`` column, no AUTOINCREMENT, extra columns such as ``finding_type``,
ids of 0 or below; another application's database may hold a ``chunks`` table of its own. So
the input is inspected and brought to the v2 shape, or refused with nothing changed.
Everything here reads first and writes only when there is something to do, in one
transaction, so a kill leaves the table as it was or as it will be.
"""

from __future__ import annotations

import re
from typing import Final

import apsw
import attrs

from contextplane.errors import StoreError
from contextplane.store.migrations.read_path import READ_INDEXES
from contextplane.store.migrations.state import column_names, table_exists, write_transaction
from contextplane.store.migrations.stemming import STEMMED_FTS
from contextplane.store.migrations.to_v2 import CHUNKS_V2_SQL, V2_COLUMNS

#: What a version-1 store is: the ``chunks`` table before D4/D7, with a full-text index whose
#: update trigger fires on *every* update. Kept here as the migration's documented input.
V1_SCHEMA_SQL: Final[str] = """
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    content TEXT NOT NULL,
    heading TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',
    subject TEXT NOT NULL DEFAULT '',
    domain TEXT NOT NULL DEFAULT 'general',
    source_type TEXT NOT NULL DEFAULT '',
    namespace TEXT NOT NULL DEFAULT '',
    epoch TEXT NOT NULL DEFAULT '',
    invalidated_at TEXT,
    invalidation_reason TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX chunks_namespace ON chunks(namespace);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    content, heading, content='chunks', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, content, heading) VALUES (new.id, new.content, new.heading);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content, heading)
    VALUES ('delete', old.id, old.content, old.heading);
END;
CREATE TRIGGER chunks_au AFTER UPDATE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content, heading)
    VALUES ('delete', old.id, old.content, old.heading);
    INSERT INTO chunks_fts(rowid, content, heading) VALUES (new.id, new.content, new.heading);
END;
PRAGMA user_version = 1;
"""


#: The version-1 columns and their v2 declarations (what ``ALTER TABLE ADD COLUMN`` adds when
#: one is missing). ``content`` and ``domain`` make a table a memory table: without them it
#: is refused.
V1_COLUMNS: Final[dict[str, str]] = {
    "content": "TEXT NOT NULL DEFAULT ''",
    "heading": "TEXT NOT NULL DEFAULT ''",
    "source": "TEXT NOT NULL DEFAULT ''",
    "subject": "TEXT NOT NULL DEFAULT ''",
    "domain": "TEXT NOT NULL DEFAULT 'general'",
    "source_type": "TEXT NOT NULL DEFAULT ''",
    "namespace": "TEXT NOT NULL DEFAULT ''",
    "epoch": "TEXT NOT NULL DEFAULT ''",
    "invalidated_at": "TEXT",
    "invalidation_reason": "TEXT",
    "created_at": "TEXT NOT NULL DEFAULT ''",
    "updated_at": "TEXT NOT NULL DEFAULT ''",
}
REQUIRED_V1_COLUMNS: Final[tuple[str, ...]] = ("content", "domain")
#: Columns our inserts never write: NOT NULL without a default, they would refuse every insert.
_UNWRITTEN: Final[frozenset[str]] = frozenset({"invalidated_at", "invalidation_reason"})

#: Tables any contextplane version creates; a database holding one of them is ours. Others'
#: tables (a newer record) may sit beside them.
ANCHOR_TABLES: Final[frozenset[str]] = frozenset(
    {
        "chunks",
        "_kb_meta",
        "injection_log",
        "prompt_snapshots",
        "prefix_texts",
        "session_summaries",
        "chunk_history",
        "chunk_log",
        "chunk_gone",
        "turn_inputs",
    }
)


@attrs.frozen
class ColumnInfo:
    name: str
    type: str
    notnull: bool
    default: str | None
    pk: int


@attrs.frozen
class ChunksShape:
    """What a ``chunks`` table is, and what bringing it to the v2 shape takes."""

    columns: tuple[ColumnInfo, ...]
    #: ``id`` is the table's INTEGER PRIMARY KEY (the rowid); False when there is no id column.
    id_is_rowid: bool
    has_id: bool
    #: Version-1 columns the table lacks (added by ALTER unless the table is rebuilt).
    missing: tuple[str, ...]
    #: Columns that are neither v1 nor v2 (``finding_type``, say): kept as they are.
    extra: tuple[str, ...]
    #: Why the table must be rewritten; empty when ALTER is enough.
    rebuild: tuple[str, ...]


def table_names(conn: apsw.Connection) -> list[str]:
    """The database's own tables (not SQLite's internal ones), by name."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]


def inspect_chunks(conn: apsw.Connection, path: str) -> ChunksShape | None:
    """The shape of the ``chunks`` table (None without one); refuses, naming what is wrong, a
    table no version of the ADR's system wrote. Reads only."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chunks'").fetchone()
    if row is None:
        return None
    sql = str(row[0] or "")
    columns = tuple(
        ColumnInfo(str(r[1]), str(r[2] or ""), bool(r[3]), None if r[4] is None else str(r[4]), int(r[5]))
        for r in conn.execute("PRAGMA table_info(chunks)")
    )
    names = {c.name for c in columns}
    missing_required = [c for c in REQUIRED_V1_COLUMNS if c not in names]
    if missing_required:
        raise StoreError(
            f"{path}: its chunks table has no {' or '.join(missing_required)} column (its columns: "
            f"{', '.join(c.name for c in columns)}), so it is not a contextplane memory table of any "
            "version; nothing was changed. Point --db, store.path or $CONTEXTPLANE_DB at a memory store"
        )
    by_name = {c.name: c for c in columns}
    pks = [c for c in columns if c.pk]
    ident = by_name.get("id")
    id_is_rowid = (
        ident is not None
        and len(pks) == 1
        and pks[0] is ident
        and ident.type.upper() == "INTEGER"
        and not re.search(r"\bWITHOUT\s+ROWID\b", sql, re.IGNORECASE)
    )
    reasons: list[str] = []
    if ident is None:
        reasons.append("it has no id column (its ids are the rowids)")
    elif not id_is_rowid:
        reasons.append("its id is not the INTEGER PRIMARY KEY")
    elif not re.search(r"\bAUTOINCREMENT\b", sql, re.IGNORECASE):
        reasons.append("its ids have no AUTOINCREMENT (a purged id could be handed out again)")
    v2 = {name for name, _ in V2_COLUMNS}
    for c in columns:
        writes = (c.name in V1_COLUMNS and c.name not in _UNWRITTEN) or c.name in v2 or c.name == "id"
        if c.notnull and c.default is None and not writes:
            reasons.append(f"its column {c.name} is NOT NULL without a default, so no insert could succeed")
    extra = tuple(c.name for c in columns if c.name not in V1_COLUMNS and c.name not in v2 and c.name != "id")
    missing = tuple(name for name in V1_COLUMNS if name not in names)
    return ChunksShape(columns, id_is_rowid, ident is not None, missing, extra, tuple(reasons))


def check_ids(conn: apsw.Connection, path: str) -> None:
    """An id column that is not the rowid must hold distinct whole numbers to be kept."""
    seen: set[int] = set()
    bad = 0
    for (value,) in conn.execute("SELECT id FROM chunks"):
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value in seen:
            bad += 1
            continue
        seen.add(value)
    if bad:
        raise StoreError(
            f"{path}: {bad} rows of its chunks table have an id that is missing, not a whole number or "
            "used twice, so they cannot keep their ids; nothing was changed. Give every row a distinct "
            "whole-number id, then run `contextplane migrate` again"
        )


def _select_expression(name: str, present: set[str]) -> str:
    """The value a v2 column takes from a version-1 row: the old cell (a NULL read as the
    column's default where v2 has one), or the default when the column did not exist."""
    decl = V1_COLUMNS.get(name)
    default = decl.split("DEFAULT ", 1)[1] if decl is not None and "DEFAULT " in decl else None
    if name not in present:
        return default if default is not None else "NULL"
    if name in ("created_at", "updated_at"):  # a missing stamp is read from the other one
        other = "updated_at" if name == "created_at" else "created_at"
        return f"coalesce({name}, {other}, '')" if other in present else f"coalesce({name}, '')"
    return f"coalesce({name}, {default})" if default is not None else name


def _rebuild_chunks(conn: apsw.Connection, path: str, shape: ChunksShape) -> None:
    """Rewrite ``chunks`` in the v2 shape, every row keeping its id and every cell (extra
    columns are kept, nullable), in one transaction."""
    if shape.has_id and not shape.id_is_rowid:
        check_ids(conn, path)
    present = {c.name for c in shape.columns}
    names = ["id", *V1_COLUMNS, *(n for n, _ in V2_COLUMNS)]
    ident = "rowid" if not shape.has_id else "id" if shape.id_is_rowid else "CAST(id AS INTEGER)"
    exprs = [
        ident,
        *(_select_expression(n, present) for n in V1_COLUMNS),
        *(n if n in present else "NULL" for n, _ in V2_COLUMNS),
    ]
    for c in shape.columns:
        if c.name in shape.extra:
            names.append(c.name)
            exprs.append(f'"{c.name}"')
    create = CHUNKS_V2_SQL.split(";")[0].replace("CREATE TABLE chunks", "CREATE TABLE _chunks_v2", 1)
    conn.execute(create)
    for c in shape.columns:
        if c.name in shape.extra:
            conn.execute(f'ALTER TABLE _chunks_v2 ADD COLUMN "{c.name}" {c.type}')
    order = exprs[0]
    conn.execute(
        f"INSERT INTO _chunks_v2({', '.join(f'{chr(34)}{n}{chr(34)}' for n in names)}) "
        f"SELECT {', '.join(exprs)} FROM chunks ORDER BY {order}"
    )
    conn.execute("DROP TABLE chunks")
    conn.execute("ALTER TABLE _chunks_v2 RENAME TO chunks")
    conn.execute("CREATE INDEX IF NOT EXISTS chunks_namespace ON chunks(namespace)")
    if not shape.id_is_rowid and table_exists(conn, "chunks_fts"):
        conn.execute("DROP TABLE chunks_fts")  # indexed by the old rowids: rebuilt by ensure_fts
        if table_exists(conn, "_kb_meta"):
            conn.execute("DELETE FROM _kb_meta WHERE key = ?", (STEMMED_FTS,))  # and stemmed again
    if table_exists(conn, "_kb_meta"):
        conn.execute("DELETE FROM _kb_meta WHERE key = ?", (READ_INDEXES,))  # the rewrite lost them


def _null_cells_sql(present: set[str]) -> str | None:
    """The ``UPDATE`` that gives every NULL cell of a version-1 column its v1 default (the
    one rule for NULL cells, see ``normalise_chunks``); None when no column can hold one."""
    names = [n for n in V1_COLUMNS if n in present and n not in _UNWRITTEN]
    if not names:
        return None
    sets = ", ".join(f"{n} = {_select_expression(n, present)}" for n in names)
    where = " OR ".join(f"{n} IS NULL" for n in names)
    return f"UPDATE chunks SET {sets} WHERE {where}"


def normalise_chunks(conn: apsw.Connection, path: str) -> tuple[str, ...]:
    """Bring a ``chunks`` table of any version-1 shape to the v2 shape; return what was done
    (empty when it already had it). Refusals (``inspect_chunks``) change nothing.

    One rule for NULL cells, whatever the shape: a NULL cell of a version-1 column reads as
    that column's version-1 default (``domain`` 'general', the text columns '', a missing
    ``created_at``/``updated_at`` from the other), before D4 and D7 are derived from it. A
    rewritten table gets it in the rewrite; a table that needs none gets it here, once, while
    it is still version 1 (it has no v2 column yet)."""
    shape = inspect_chunks(conn, path)
    if shape is None or not (shape.rebuild or shape.missing or _v1_nulls_due(conn, shape)):
        return ()
    with write_transaction(conn):
        shape = inspect_chunks(conn, path)  # another process may have done it meanwhile
        if shape is None or not (shape.rebuild or shape.missing or _v1_nulls_due(conn, shape)):
            return ()
        if shape.rebuild:
            _rebuild_chunks(conn, path, shape)
            reasons = "; ".join(shape.rebuild)
            return (f"rewrote the chunks table in the v2 shape, keeping every id: {reasons}",)
        done = []
        for name in shape.missing:
            conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {V1_COLUMNS[name]}")
        if shape.missing:
            done.append(f"added the version-1 columns it lacked: {', '.join(shape.missing)}")
        fill = _null_cells_sql(column_names(conn, "chunks"))
        if fill is not None:
            conn.execute(fill)
            if conn.changes():
                done.append(f"gave {conn.changes()} rows' NULL cells their version-1 defaults")
        return tuple(done)


def _v1_nulls_due(conn: apsw.Connection, shape: ChunksShape) -> bool:
    """A version-1 table (no v2 column yet) with a NULL cell the rule fills."""
    present = {c.name for c in shape.columns}
    if present & {n for n, _ in V2_COLUMNS}:
        return False
    nullable = [
        c.name for c in shape.columns if c.name in V1_COLUMNS and c.name not in _UNWRITTEN and not c.notnull
    ]
    if not nullable:
        return False
    where = " OR ".join(f"{n} IS NULL" for n in nullable)
    return conn.execute(f"SELECT 1 FROM chunks WHERE {where} LIMIT 1").fetchone() is not None


def planned_normalisation(conn: apsw.Connection, path: str) -> tuple[str, ...]:
    """What ``normalise_chunks`` would do, without doing it (for ``migrate --dry-run``)."""
    shape = inspect_chunks(conn, path)
    if shape is None:
        return ()
    if shape.rebuild:
        return ("rewrite the chunks table in the v2 shape, keeping every id: " + "; ".join(shape.rebuild),)
    planned = []
    if shape.missing:
        planned.append(f"add the version-1 columns it lacks: {', '.join(shape.missing)}")
    if _v1_nulls_due(conn, shape):
        planned.append("give NULL cells of version-1 columns their version-1 defaults")
    return tuple(planned)
