"""The plain full-text index: ``chunks_fts`` (FTS5, external content over ``chunks``), its three
triggers and its bulk-load settings, and making an existing store's index exactly that.

Why the update trigger fires only on ``UPDATE OF content, heading``: a trigger that fires on
every metadata update (as version 1's did) would re-index every row during a backfill (about 10x
slower). The stemmed index (``stemming``) has the same shape with the Porter tokenizer.
"""

from __future__ import annotations

from typing import Final

import apsw

#: FTS5 settings for bulk loads, stored in the index's own config table. ``hashsize``: pending
#: index entries kept in memory per write transaction (default 1 MiB); 16 MiB means fewer, larger
#: segments. ``automerge``: segments per level before a merge (default 4); 8 halves merge work
#: during ingest. Together about 40k -> 55k rows/s here (bench/store_bench.py).
FTS_CONFIG: Final[dict[str, int]] = {"hashsize": 16 * 1024 * 1024, "automerge": 8}

FTS_SQL: Final[str] = (
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(content, heading, content='chunks', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
)

#: name -> body. The update trigger is limited to the indexed columns (see the module docstring).
FTS_TRIGGERS: Final[dict[str, str]] = {
    "chunks_fts_ai": """CREATE TRIGGER chunks_fts_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, content, heading) VALUES (new.id, new.content, new.heading);
END""",
    "chunks_fts_ad": """CREATE TRIGGER chunks_fts_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content, heading)
    VALUES ('delete', old.id, old.content, old.heading);
END""",
    "chunks_fts_au": """CREATE TRIGGER chunks_fts_au AFTER UPDATE OF content, heading ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content, heading)
    VALUES ('delete', old.id, old.content, old.heading);
    INSERT INTO chunks_fts(rowid, content, heading) VALUES (new.id, new.content, new.heading);
END""",
}

#: The full-text index with the Porter stemmer over unicode61: "deploys", "deployed" and
#: "deploying" all match "deploy".
STEMMED_FTS_SQL: Final[str] = FTS_SQL.replace(
    "tokenize='unicode61 remove_diacritics 2'", "tokenize='porter unicode61 remove_diacritics 2'"
)


def fts_sql_is_current(sql: str) -> bool:
    """True for either full-text definition this version writes (plain, or stemmed; a renamed
    table's SQL carries its name quoted)."""
    flat = "".join(sql.replace('"chunks_fts"', "chunks_fts").split())
    return flat in ("".join(FTS_SQL.split()), "".join(STEMMED_FTS_SQL.split()))


def ensure_fts(conn: apsw.Connection) -> None:
    """Create the external-content FTS table if absent (rebuilding it from ``chunks``) and make
    the triggers exactly ours, dropping any legacy trigger that fires on metadata updates."""
    existing = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
    rebuild = False
    if existing is None or not fts_sql_is_current(str(existing[0])):
        if existing is not None:
            conn.execute("DROP TABLE chunks_fts")
        conn.execute(FTS_SQL)
        rebuild = True
    triggers = dict(
        conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'chunks'")
    )
    for name, sql in triggers.items():
        if name.startswith(("chunks_vec", "chunks_fts_stem", "chunks_migrated")):
            continue  # vector-index, stemming-build and history triggers belong to their own steps
        if FTS_TRIGGERS.get(name) != sql:
            conn.execute(f'DROP TRIGGER "{name}"')
    for name, sql in FTS_TRIGGERS.items():
        if triggers.get(name) != sql:
            conn.execute(sql)
    config = dict(conn.execute("SELECT k, v FROM chunks_fts_config"))
    for key, value in FTS_CONFIG.items():
        if config.get(key) != value:
            conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES (?, ?)", (key, value))
    if rebuild:
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')")
