"""The stemming tokenizer as a schema step (issue 11): resumable, the old index readable until
the swap, writes made during the build kept, and nothing indexed twice."""

from __future__ import annotations

import logging
from pathlib import Path

import apsw
import click
import pytest
from click.testing import CliRunner

from contextplane.store import SQLiteKnowledgeStore, cli, history
from contextplane.store import migrate as m
from contextplane.store.sqlite import connect

STAMP = "2025-01-01T00:00:00.000000Z"


def unstemmed_store(path: Path, contents: list[str]) -> apsw.Connection:
    """A version-2 store as the previous release wrote it: plain unicode61 index, no marker."""
    conn = connect(path)
    m.ensure_schema(conn, str(path))
    assert m.stemming_pending(conn)
    conn.executemany(
        "INSERT INTO chunks(content, created_at, updated_at) VALUES (?, ?, ?)", [(c, STAMP, STAMP) for c in contents]
    )
    return conn


def matches(conn: apsw.Connection, word: str) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rowid", (f'"{word}"',))]


def tokenizer(conn: apsw.Connection) -> str:
    return str(conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()[0])


class Stop(Exception):
    pass


def test_a_killed_build_resumes_and_keeps_every_write_made_meanwhile(tmp_path: Path) -> None:
    conn = unstemmed_store(tmp_path / "s.sqlite3", [f"row {i} deploys" for i in range(1, 11)])
    seen: list[tuple[int, int]] = []

    def stop_after_two(done: int, total: int) -> None:
        seen.append((done, total))
        if len(seen) == 2:
            raise Stop

    with pytest.raises(Stop):
        m.migrate_stemming(conn, batch_rows=3, on_batch=stop_after_two)
    assert seen == [(3, 10), (6, 10)]
    # killed part-way: the old (unstemmed) index still answers, the new one is half built
    assert m.stemming_pending(conn) and "porter" not in tokenizer(conn)
    assert matches(conn, "deploys") == list(range(1, 11)) and matches(conn, "deploy") == []
    assert m.stemming_rows_left(conn) == 4
    # writes during the build: rows already covered (2, 3) and not yet covered (8, 9), a new row
    conn.execute("UPDATE chunks SET content = 'row 2 deployed again' WHERE id = 2")
    conn.execute("UPDATE chunks SET content = 'row 8 shipping instead' WHERE id = 8")
    history.record_purged(conn, "id IN (3, 9)", {}, STAMP)  # what a purge does before it deletes
    conn.execute("DELETE FROM chunks WHERE id IN (3, 9)")
    conn.execute("INSERT INTO chunks(content, created_at, updated_at) VALUES ('row 11 deploying', ?, ?)", (STAMP, STAMP))
    assert m.migrate_stemming(conn, batch_rows=3) == 3  # ids 7, 8, 10: the rest of the backlog
    assert not m.stemming_pending(conn) and "porter" in tokenizer(conn)
    assert m.meta_get(conn, "stemmed_fts_cursor") is None and m.meta_get(conn, "stemmed_fts_high") is None
    # every live row indexed once, stemmed, with its current text
    conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
    assert matches(conn, "deploy") == [1, 2, 4, 5, 6, 7, 10, 11]
    assert matches(conn, "shipping") == [8]
    assert matches(conn, "again") == [2]
    # the swapped-in index keeps the standard triggers and the bulk-load settings
    conn.execute("INSERT INTO chunks(content, created_at, updated_at) VALUES ('row 12 deploys', ?, ?)", (STAMP, STAMP))
    assert matches(conn, "deploy")[-1] == 12
    config = dict(conn.execute("SELECT k, v FROM chunks_fts_config").fetchall())
    assert config["hashsize"] == m.FTS_CONFIG["hashsize"] and config["automerge"] == m.FTS_CONFIG["automerge"]
    triggers = {
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'chunks'")
    }
    assert triggers == {"chunks_fts_ai", "chunks_fts_ad", "chunks_fts_au", "chunks_history_append", "chunks_history_kept"}
    assert m.migrate_stemming(conn) == 0  # done: a no-op
    # the v1 upgrade path recognises the stemmed definition and does not rebuild it away
    m.upgrade_schema(conn)
    assert "porter" in tokenizer(conn) and matches(conn, "deploy")[-1] == 12
    conn.close()


def test_a_fresh_store_is_stemmed_at_once(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "s.sqlite3") as store:
        assert "porter" in tokenizer(store.conn)
        assert m.meta_get(store.conn, m.STEMMED_FTS) is not None


def test_a_small_store_is_stemmed_at_open(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    unstemmed_store(path, ["we deploy on tuesdays"]).close()
    with SQLiteKnowledgeStore(path) as store:
        assert [h.chunk.id for h in store.search("deploys")] == ["1"]


def test_a_large_store_keeps_its_old_index_until_migrate_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(m, "INLINE_STEMMING_MAX_ROWS", 2)
    path = tmp_path / "s.sqlite3"
    unstemmed_store(path, ["we deploy on tuesdays", "lunch at noon", "deploys are frozen"]).close()
    with caplog.at_level(logging.WARNING, "contextplane.store"), SQLiteKnowledgeStore(path) as store:
        assert [h.chunk.id for h in store.search("deploy")] == ["1"]  # readable, unstemmed
    assert f"{path}: the full-text index is not stemmed yet (3 rows to index)" in caplog.text
    assert "`contextplane migrate`" in caplog.text

    @click.group()
    def root() -> None:
        pass

    cli.register(root)
    result = CliRunner().invoke(root, ["migrate", "--db", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"{path}: full-text index rebuilt with stemming; 3 rows" in result.output
    with SQLiteKnowledgeStore(path) as store:
        assert sorted(h.chunk.id for h in store.search("deploy")) == ["1", "3"]
