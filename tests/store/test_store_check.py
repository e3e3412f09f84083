"""``contextplane store check`` on the embedded store: a damaged index page, a damaged history
entry and an inconsistent vector index are each named, with exit status 1; a sound store
exits 0 (issue 26, item 7)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner

from contextplane.cli import main
from contextplane.store import SQLiteKnowledgeStore
from tests.store.helpers import HashEmbedder


def build(path: Path, rows: int = 1500) -> list[str]:
    """A real store: enough rows with subjects that ``chunks_subject`` spans several pages,
    some history, vectors; checkpointed, so every page is in the file itself."""
    with SQLiteKnowledgeStore(path, embedder=HashEmbedder()) as store:
        ids = store.add_chunks(
            [
                {
                    "content": f"memory {i}: the deploy window of service {i} is on day {i % 7}",
                    "domain": "fact",
                    "source_type": "operator",
                    "subject": f"service-{i}-window",
                }
                for i in range(rows)
            ]
        )
        store.set_review_state(ids[0], "rejected", by="sam")
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    return ids


def check(path: Path, *extra: str):
    return CliRunner().invoke(main, ["store", "check", "--db", str(path), *extra])


def root_page(path: Path, index: str) -> tuple[int, int]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        (page,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (index,)).fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    finally:
        conn.close()
    return int(page), int(size)


def test_a_sound_store_exits_0_with_one_ok_line(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    build(path)
    res = check(path)
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines() == [
        f"{path}: ok (integrity_check, history of 1500 rows, 1500 vectors)"
    ]
    assert check(path, "--quick").exit_code == 0


@pytest.mark.parametrize("quick", [False, True])
def test_a_damaged_index_page_is_named_and_fails_the_check(tmp_path: Path, quick: bool) -> None:
    path = tmp_path / "memory.sqlite3"
    build(path)
    page, size = root_page(path, "chunks_subject")
    with path.open("r+b") as f:  # the root page's cell pointers, overwritten
        f.seek((page - 1) * size + 12)
        f.write(b"\xff" * 64)
    # What the issue saw: the store opens and reads as if nothing were wrong.
    listed = CliRunner().invoke(main, ["memory", "list", "--db", str(path), "--limit", "1"])
    assert listed.exit_code == 0, listed.output
    res = check(path, *(["--quick"] if quick else []))
    assert res.exit_code == 1, res.output
    problems = [line for line in res.output.splitlines() if line.startswith("problem: ")]
    assert problems, res.output
    assert any("(index chunks_subject)" in p or "index chunks_subject (on chunks)" in p for p in problems), problems
    assert "Traceback" not in res.output


def test_a_damaged_history_entry_is_named(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    ids = build(path, rows=20)
    conn = apsw.Connection(str(path))
    conn.execute("DROP TRIGGER chunks_history_append")  # a hand edit the append guard cannot see
    conn.execute(
        "UPDATE chunks SET history = coalesce(history, '') || '{not json' || char(10) WHERE id = ?",
        (int(ids[3]),),
    )
    conn.close()
    res = check(path)
    assert res.exit_code == 1, res.output
    (problem,) = [line for line in res.output.splitlines() if line.startswith("problem: ")]
    assert problem.startswith(f"problem: history of memory {ids[3]}: entry 1 of memory {ids[3]}'s history is damaged (not JSON")
    assert problem.endswith("cannot be read until the store file is restored from a backup")


def test_an_inconsistent_vector_index_is_named(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    ids = build(path, rows=20)
    conn = apsw.Connection(str(path))
    orphan = int(ids[-1]) + 1000
    conn.execute(  # a vector whose row is gone (the delete trigger bypassed, a torn copy)
        "INSERT INTO chunks_vec(key, chunk_id, embedding) SELECT ?, ?, embedding FROM chunks_vec LIMIT 1",
        (orphan, orphan),
    )
    conn.execute("UPDATE chunks_vec SET embedding = x'00' WHERE chunk_id = ?", (int(ids[6]),))
    conn.close()
    res = check(path)
    assert res.exit_code == 1, res.output
    problems = [line.removeprefix("problem: ") for line in res.output.splitlines() if line.startswith("problem:")]
    assert f"vector of memory {orphan} has no row in chunks (an orphan the search may return)" in problems
    assert any(p.startswith(f"vector of memory {ids[6]}: not ") for p in problems), problems


def test_a_missing_store_is_one_error_line(tmp_path: Path) -> None:
    res = check(tmp_path / "nope.sqlite3")
    assert res.exit_code == 2
    assert res.output.startswith("error: ") and "no store here" in res.output
    assert not (tmp_path / "nope.sqlite3").exists()
