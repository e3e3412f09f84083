"""``memory import`` on PostgreSQL (issue 23, item 16): an export of the embedded store restores
exactly into PostgreSQL, every public read and write works there, and PostgreSQL's export
restores exactly into a new embedded store (SQLite -> PostgreSQL -> SQLite, byte for byte)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from contextplane.cli import main
from contextplane.errors import StoreError, ValidationError
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.check import check_file
from contextplane.store.jsonl import import_lines
from tests.postgres.helpers import HashEmbedder
from tests.store.round_trip import export_text, restored_history, rows_of, same_reads, seed


def run(*args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(main, list(args), prog_name="contextplane")
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_sqlite_to_postgres_to_sqlite_is_exact(
    tmp_path: Path, pg_url: str, pg_schema: str, pg_backend_factory: Any
) -> None:
    src = tmp_path / "a.sqlite3"
    with SQLiteKnowledgeStore(src) as store:
        ids = seed(store)
    first = run("memory", "export", "--db", str(src)).stdout
    (tmp_path / "e.jsonl").write_text(first, encoding="utf-8")
    config = tmp_path / "pg.toml"
    config.write_text(
        f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n\n[plugin.postgres]\nschema = "{pg_schema}"\n',
        encoding="utf-8",
    )
    out = json.loads(run("memory", "import", str(tmp_path / "e.jsonl"), "--config", str(config), "--json").stdout)
    assert out["exact"] is True and out["ids"] == {r["id"]: r["id"] for r in rows_of(first)}
    assert run("memory", "export", "--config", str(config)).stdout == first  # every attribute, byte for byte
    pg = pg_backend_factory(schema=pg_schema).memories
    with SQLiteKnowledgeStore(src) as a:
        same_reads(a, pg, search=None)  # list/count with each filter and get, every attribute
    for chunk in pg.list_chunks():
        restored_history(pg, chunk)
    assert [h.chunk.id for h in pg.search("who approves deploys")][:1] == [ids["v3"]]
    assert {h.chunk.id for h in pg.search("support group", namespaces=["session:s1"])} == {ids["said"], ids["said2"]}
    assert ids["expired"] not in {h.chunk.id for h in pg.search("promo code")}
    with pg.as_of(pg.history(ids["v1"])[0].at - timedelta(seconds=1)) as past:
        assert past.list_chunks() == []
    # Writes on the restored rows: the identity sequence continues after the export's ids.
    newer = pg.supersede(ids["v3"], "Kim approves deploys")
    assert int(newer) == max(int(i) for i in ids.values()) + 1
    assert [h.chunk.content for h in pg.search("who approves deploys")][:1] == ["Kim approves deploys"]
    added = pg.add_chunk("A memory written after the import", source_type="operator")
    assert int(added) == int(newer) + 1
    pg.invalidate_chunk(ids["window"], reason="moved to Wednesday", by="carol")
    pg.set_review_state(ids["profile"], "confirmed", by="carol")
    assert [e.event for e in pg.history(ids["window"])] == ["created", "invalidated"]
    assert pg.purge(ids=[ids["v3"]]) == 0  # superseded: it stays
    assert pg.purge(ids=[ids["window"]]) == 1
    assert pg.check() == []
    # ... and back into a new embedded store, exactly.
    second = export_text(pg)
    with SQLiteKnowledgeStore(tmp_path / "c.sqlite3") as c:
        assert import_lines(c, second.splitlines()).exact
        assert export_text(c) == second
        same_reads(pg, c, search=None)
        assert c.get(newer).content == "Kim approves deploys" and c.get(ids["v3"]).superseded_by == newer
    assert check_file(tmp_path / "c.sqlite3").problems == ()


def test_restored_rows_get_vectors_and_a_large_restore_goes_by_copy(pg_backend_factory: Any) -> None:
    rows = [
        {"id": str(10 + 2 * n), "content": f"note {n} about topic {n % 7} and the kiwi harvest",
         "created_at": f"2024-01-01T00:00:{n % 60:02d}.000001Z", "updated_at": "2024-02-01T00:00:00Z",
         "review_state": "confirmed", "source_type": "operator", "memory_kind": "note"}
        for n in range(70)  # above COPY_MIN_ROWS: the binary COPY path
    ]
    store = pg_backend_factory(embedder=HashEmbedder()).memories
    assert store.restore_chunks(rows) == [r["id"] for r in rows]
    assert store.vectorless_count() == 0
    assert store.vector_neighbours(rows[33]["content"], 1, exact=True) == [rows[33]["id"]]
    assert [str(c.created_at) for c in store.list_chunks()][:1] == ["2024-01-01 00:00:00.000001+00:00"]
    assert int(store.add_chunk("after the restore")) == int(rows[-1]["id"]) + 1


def test_postgres_refuses_a_held_or_purged_id_and_writes_nothing(pg_backend_factory: Any, tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3") as a:
        seed(a)
        rows = rows_of(export_text(a))
    store = pg_backend_factory().memories
    held = store.add_chunk("already here", source_type="operator")
    gone = store.add_chunk("to be purged", source_type="operator")
    store.invalidate_chunk(gone, reason="x")
    assert store.purge(ids=[gone]) == 1
    position = store.history_position().seq
    with pytest.raises(StoreError, match=f"memory {held} is already in this store; an exact restore keeps ids"):
        store.restore_chunks(rows)
    with pytest.raises(StoreError, match=rf"memory {gone} was purged from this store \(its history keeps the id\)"):
        store.restore_chunks(rows[1:])
    assert [c.content for c in store.list_chunks()] == ["already here"]
    assert store.history_position().seq == position  # no event either
    # Ids the store never handed out restore beside its own rows.
    assert store.restore_chunks(rows[2:]) == [r["id"] for r in rows[2:]]
    assert len(store.list_chunks()) == 1 + len(rows) - 2


def test_a_restored_embedded_store_copies_to_postgres_with_its_restored_history(
    tmp_path: Path, pg_backend_factory: Any
) -> None:
    """``store copy`` reads the restore's history layout (a log entry per run of ids, with gaps)."""
    from contextplane_postgres.copy import copy_store

    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3") as a:
        ids = seed(a)
        text = export_text(a)
    with SQLiteKnowledgeStore(tmp_path / "b.sqlite3") as b:
        assert import_lines(b, text.splitlines()).exact
        b.invalidate_chunk(ids["later"], reason="cancelled")
        histories = {i: b.history(i) for i in ids.values()}
        changed = export_text(b)
    backend = pg_backend_factory()
    copy_store(tmp_path / "b.sqlite3", backend.db)
    pg = backend.memories
    assert export_text(pg) == changed
    for chunk_id, events in histories.items():
        assert pg.history(chunk_id) == events
    assert [e.event for e in pg.history(ids["later"])] == ["created", "invalidated"]
    assert int(pg.add_chunk("after the copy")) == max(int(i) for i in ids.values()) + 1


def test_ids_below_the_sequence_restore_and_new_rows_continue_after_it(pg_backend_factory: Any) -> None:
    store = pg_backend_factory().memories
    [store.add_chunk(f"row {n}", source_type="operator") for n in range(3)]
    row = {"id": "100", "content": "restored far ahead", "created_at": "2020-01-01T00:00:00Z",
           "updated_at": "2020-01-01T00:00:00Z"}
    assert store.restore_chunks([row]) == ["100"]
    assert store.add_chunk("next", source_type="operator") == "101"
    assert store.restore_chunks([{**row, "id": "50", "content": "restored in a gap"}]) == ["50"]
    assert store.add_chunk("after the gap", source_type="operator") == "102"  # the sequence never goes back
    # A migrated version-1 file may hold an id of 0 or below: PostgreSQL's ids start at 1.
    with pytest.raises(ValidationError, match=r"memory -2: this store's ids are whole numbers from 1.*--new-ids"):
        store.restore_chunks([{**row, "id": "-2"}])
    assert store.get("-2") is None and len(store.list_chunks()) == 7
