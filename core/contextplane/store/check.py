"""``contextplane store check`` for the embedded store: is the file whole, does every row's
history parse, does the vector index agree with the rows.

Why a command of its own: a damaged page in an index is not seen when the store opens, and
list, search and writes may go on succeeding over it (a lookup through the index silently
misses rows) until a write lands on the page. SQLite's own ``integrity_check`` reads every
page and every index entry; the history and vector checks read what SQLite cannot judge (our
JSON history lines, the packed vector keys). Everything here only reads: the file is opened
read-only and nothing in it changes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

import apsw
import attrs

from contextplane.errors import StoreError
from contextplane.store import history, migrate
from contextplane.store.connection import connect
from contextplane.store.vector_index import LIST_SHIFT

#: How many problems ``integrity_check`` reports at most (it stops there; so do we).
MAX_PROBLEMS: Final[int] = 100

_TREE: Final[re.Pattern[str]] = re.compile(r"\bTree (\d+)\b|\bpage (\d+)\b")


@attrs.frozen
class CheckReport:
    """What one check found: one line per problem, and what was checked (for the ok line)."""

    target: str
    problems: tuple[str, ...]
    checked: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_file(path: str | os.PathLike[str], *, quick: bool = False) -> CheckReport:
    """Check the embedded store at ``path`` (and its records file, when there is one)."""
    target = str(path)
    problems: list[str] = []
    checked: list[str] = []
    try:
        conn = connect(target, create=False, read_only=True)
    except StoreError as exc:
        return CheckReport(target, (f"cannot open: {exc}",), ())
    try:
        problems += _integrity(conn, quick)
        checked.append("quick_check" if quick else "integrity_check")
        if migrate.table_exists(conn, "chunks") and _has_column(conn, "chunks", "history"):
            rows, damaged = history.check_histories(conn)
            problems += damaged
            checked.append(f"history of {rows} rows")
        if migrate.table_exists(conn, "chunks_vec"):
            vectors, wrong = _vectors(conn)
            problems += wrong
            checked.append(f"{vectors} vectors")
    except apsw.Error as exc:  # a damaged page can stop a read half-way: that is a finding too
        problems.append(f"reading the store failed: {type(exc).__name__}: {exc}")
    finally:
        conn.close()
    records = _records_file(Path(target))
    if records is not None and records.exists():
        found = check_file(records, quick=quick)
        problems += [f"records file {records}: {p}" for p in found.problems]
        checked.append(f"records file ({', '.join(found.checked)})")
    return CheckReport(target, tuple(problems), tuple(checked))


def _records_file(path: Path) -> Path | None:
    """The records file beside a memory store (``memory.records.sqlite3``); None for one."""
    if path.stem.endswith(".records"):
        return None
    return path.with_name(f"{path.stem}.records{path.suffix}")


def _integrity(conn: apsw.Connection, quick: bool) -> list[str]:
    pragma = "quick_check" if quick else "integrity_check"
    names = _tree_names(conn)
    out = []
    try:
        for (found,) in conn.execute(f"PRAGMA {pragma}({MAX_PROBLEMS})"):
            for line in str(found).splitlines():  # a row may hold several lines
                text = line.strip()
                if text and text != "ok" and not text.startswith("*** in database"):
                    out.append(f"{pragma}: {_named(text, names)}")
    except apsw.CorruptError as exc:  # a page too damaged to walk stops the whole check
        out += _locate(conn, pragma, exc)
    return out


def _locate(conn: apsw.Connection, pragma: str, exc: apsw.Error) -> list[str]:
    """Which table or index holds the page that stopped ``pragma``: each table is checked on
    its own, and in a damaged one each index is read through in its own order."""
    tables = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    found = []
    for table in tables:
        try:
            conn.execute(f'PRAGMA {pragma}("{table}")').fetchall()
            continue
        except apsw.Error:
            pass
        bad = [name for name, sql in _indexes(conn, table) if not _readable(conn, table, name, sql)]
        for name in bad:
            found.append(
                f"{pragma}: index {name} (on {table}) is damaged ({exc}); lookups through it can "
                f"miss rows: `REINDEX {name}` on a writable copy rebuilds it from the table"
            )
        if not bad:
            found.append(
                f"{pragma}: table {table} is damaged ({exc}); restore the store from a backup "
                "(`sqlite3 FILE .recover` salvages what it can)"
            )
    return found or [f"{pragma}: stopped ({exc}); the damaged page could not be placed"]


def _indexes(conn: apsw.Connection, table: str) -> list[tuple[str, str]]:
    return [
        (str(name), str(sql))
        for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
            (table,),
        )
    ]


def _readable(conn: apsw.Connection, table: str, index: str, sql: str) -> bool:
    """Whether every entry of ``index`` reads: a scan that must go through it (its own key
    order, its own ``WHERE`` when it is partial)."""
    keys = [str(r[2]) for r in conn.execute(f'PRAGMA index_info("{index}")') if r[2] is not None]
    if not keys:
        return True  # an index on expressions: integrity_check's own line is all there is
    partial = re.split(r"\bWHERE\b", sql, maxsplit=1, flags=re.IGNORECASE)
    where = partial[1] if len(partial) == 2 else "1"
    listed = ", ".join(f'"{k}"' for k in keys)
    try:
        conn.execute(
            f'SELECT count(*) FROM (SELECT {listed} FROM "{table}" INDEXED BY "{index}" '
            f"WHERE {where} ORDER BY {listed})"
        ).fetchall()
    except apsw.Error:
        return False
    return True


def _tree_names(conn: apsw.Connection) -> dict[int, str]:
    """Root page -> "index chunks_subject" (``integrity_check`` names b-trees by root page)."""
    try:
        rows = conn.execute("SELECT rootpage, type, name FROM sqlite_master WHERE rootpage > 0").fetchall()
    except apsw.Error:
        return {}
    return {int(str(page)): f"{kind} {name}" for page, kind, name in rows}


def _named(text: str, names: dict[int, str]) -> str:
    """``integrity_check``'s line with each ``Tree N`` named (``Tree 7 (index chunks_subject)``)."""

    def name(match: re.Match[str]) -> str:
        if match.group(1) is not None and int(match.group(1)) in names:
            return f"{match.group(0)} ({names[int(match.group(1))]})"
        return match.group(0)

    return _TREE.sub(name, text)


def _has_column(conn: apsw.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def _vectors(conn: apsw.Connection) -> tuple[int, list[str]]:
    """The vector index against the rows: every vector's key carries its row's id and a list
    that exists, every vector belongs to a row, every vector has the stored width."""
    problems = []
    count = int(migrate.scalar(conn, "SELECT count(*) FROM chunks_vec"))
    span = (1 << LIST_SHIFT) - 1
    dims = migrate.meta_get(conn, "vector_dimensions")
    checks = [
        (
            "SELECT chunk_id FROM chunks_vec WHERE chunk_id NOT IN (SELECT id FROM chunks)",
            "vector of memory {} has no row in chunks (an orphan the search may return)",
        ),
        (
            f"SELECT chunk_id FROM chunks_vec WHERE (key & {span}) != chunk_id",
            "vector of memory {}: its key names another row",
        ),
        (
            f"SELECT chunk_id FROM chunks_vec WHERE (key >> {LIST_SHIFT}) != 0 "
            f"AND (key >> {LIST_SHIFT}) NOT IN (SELECT list FROM _vec_centroids)",
            "vector of memory {}: its list has no centroid (the search never scans it)",
        ),
    ]
    if dims is not None and dims.isdigit():
        checks.append(
            (
                f"SELECT chunk_id FROM chunks_vec WHERE length(embedding) != {4 * int(dims)}",
                f"vector of memory {{}}: not {dims} float32 values (the store's vector width)",
            )
        )
    for sql, message in checks:
        for (chunk_id,) in conn.execute(f"{sql} LIMIT {MAX_PROBLEMS}"):
            problems.append(message.format(chunk_id))
    return count, problems
