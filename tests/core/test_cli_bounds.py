"""The command line bounds what one write takes and what ``memory show`` prints (issue 23
item 9): a 14 MB file or a 50 MB paste is refused with its size, not stored, and a huge memory
is shown cut, with ``--all`` to print it whole."""

from __future__ import annotations

from pathlib import Path

from contextplane.store import SQLiteKnowledgeStore

from .test_cli_bad_input import run


def test_a_write_over_store_max_write_chars_is_refused_from_every_source(tmp_path: Path) -> None:
    db = tmp_path / "memory.sqlite3"
    config = tmp_path / "contextplane.toml"
    config.write_text("[store]\nmax_write_chars = 1000\n")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 14_000_000)
    refused = [
        run("memory", "add", "--file", str(big), "--db", str(db), "--config", str(config), ok=False),
        run("memory", "add", "-", "--db", str(db), "--config", str(config), input=b"y" * 5_000_000, ok=False),
        run("memory", "add", "z" * 1_001, "--db", str(db), "--config", str(config), ok=False),
    ]
    assert [r.exit_code for r in refused] == [2, 2, 2]
    assert refused[0].output == (
        f"error: content: {big} holds more than 4,000 bytes, over the 1,000-char limit for one memory "
        "(store.max_write_chars); split it into smaller memories, or raise store.max_write_chars\n"
    )
    assert "standard input holds more than 4,000 bytes" in refused[1].output
    assert refused[2].output == (
        "error: content: 1,001 chars, over the 1,000-char limit for one memory (store.max_write_chars); "
        "split it into smaller memories, or raise store.max_write_chars\n"
    )
    assert not db.exists()  # refused before the store is opened
    # At the limit it is taken; the default limit (100,000) applies without a configuration.
    run("memory", "add", "é" * 1_000, "--db", str(db), "--config", str(config))
    default = run("memory", "add", "w" * 100_001, "--db", str(db), ok=False)
    assert "100,001 chars, over the 100,000-char limit" in default.output
    over = run("memory", "supersede", "1", "v" * 1_001, "--db", str(db), "--config", str(config), ok=False)
    assert "1,001 chars, over the 1,000-char limit" in over.output
    with SQLiteKnowledgeStore(db) as store:
        assert [len(c.content) for c in store.list_chunks(limit=None)] == [1_000]


def test_memory_show_cuts_a_huge_memory_unless_asked_for_all(tmp_path: Path) -> None:
    db = tmp_path / "memory.sqlite3"
    huge = "".join(f"line {i}\n" for i in range(200_000))
    with SQLiteKnowledgeStore(db) as store:
        chunk_id = store.add_chunk(huge, source_type="operator")
    shown = run("memory", "show", chunk_id, "--db", str(db)).output
    assert len(shown) < 15_000
    assert f"[… cut: {len(huge) - 10_000:,} more chars; --all prints the whole memory]" in shown
    assert f"content_chars: {len(huge)}" in shown
    whole = run("memory", "show", chunk_id, "--all", "--db", str(db)).output
    assert huge.rstrip("\n") in whole and "cut:" not in whole
    as_json = run("memory", "show", chunk_id, "--json", "--db", str(db)).output
    assert len(as_json) < 20_000 and '"content_chars"' in as_json
