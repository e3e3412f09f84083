"""``memory import`` restores an export exactly (issue 23, item 16): every attribute of every
row, ids and times included, then every public read and write works on the restored store; an
id the store holds is refused and nothing is imported; a store without exact restore gets new
ids and says so."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from contextplane.cli import main
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.consolidation import Consolidation
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.check import check_file
from contextplane.store.jsonl import CARRIED, import_lines
from contextplane.testing.memory import InMemoryBackend, InMemoryKnowledgeStore
from tests.store.helpers import HashEmbedder
from tests.store.round_trip import export_text, restored_history, rows_of, same_reads, seed


def run(*args: str, ok: bool = True, input: str | None = None) -> Any:
    result = CliRunner().invoke(main, list(args), input=input, prog_name="contextplane")
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_export_import_export_is_byte_identical_and_the_restored_store_reads_and_writes(tmp_path: Path) -> None:
    src, dst, copy = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3", tmp_path / "c.sqlite3"
    with SQLiteKnowledgeStore(src) as store:
        ids = seed(store)
    first = run("memory", "export", "--db", str(src)).stdout
    head = json.loads(first.splitlines()[0])
    assert head["exact_import_keeps"] == list(CARRIED) and head["rows"] == len(ids) == 14
    (tmp_path / "e.jsonl").write_text(first, encoding="utf-8")
    out = json.loads(run("memory", "import", str(tmp_path / "e.jsonl"), "--db", str(dst), "--json").stdout)
    assert out["exact"] is True and out["imported"] == 14
    assert out["ids"] == {r["id"]: r["id"] for r in rows_of(first)}  # every id kept (a purged one is a gap)
    assert sorted(int(i) for i in ids.values()) != list(range(1, 15))
    assert run("memory", "export", "--db", str(dst)).stdout == first  # every attribute of every row
    with SQLiteKnowledgeStore(src) as a, SQLiteKnowledgeStore(dst) as b:
        same_reads(a, b)  # list/count with each filter, get, full-text search: as on the original
        for chunk in b.list_chunks():
            restored_history(b, chunk)
        restored_at = b.history(ids["v1"])[0].at
        with b.as_of(restored_at - timedelta(seconds=1)) as past:  # the store did not hold them yet
            assert past.list_chunks() == []
        with b.as_of(b.history_position()) as now:
            assert now.list_chunks() == b.list_chunks()
        # The chain as exported: the head is delivered, the old links only with include_superseded.
        assert [h.chunk.id for h in b.search("who approves deploys")][:1] == [ids["v3"]]
        assert b.get(ids["v1"]).superseded_by == ids["v2"] and b.get(ids["v2"]).superseded_by == ids["v3"]
    # A restored head that superseded another stays for the audit trail (its history says so).
    res = run("memory", "purge", ids["v3"], "--db", str(dst), ok=False)
    assert res.exit_code == 2 and "superseded another row" in res.stderr
    with SQLiteKnowledgeStore(dst) as b:
        newer = b.supersede(ids["v3"], "Kim approves deploys")
        assert int(newer) == max(int(i) for i in ids.values()) + 1  # new ids continue after the export's
        assert [h.chunk.content for h in b.search("who approves deploys")][:1] == ["Kim approves deploys"]
        added = b.add_chunk("A memory written after the import", source_type="operator")
        assert int(added) == int(newer) + 1 and b.get(added).review_state == "confirmed"
        b.invalidate_chunk(ids["window"], reason="moved to Wednesday", by="carol")
        b.set_review_state(ids["profile"], "confirmed", by="carol")
        assert [e.event for e in b.history(ids["window"])] == ["created", "invalidated"]
        assert [e.event for e in b.history(ids["v3"])] == ["created", "superseded"]
        assert b.purge(ids=[ids["window"]]) == 1 and b.get(ids["window"]) is None
        assert b.count_chunks() == 15
    assert check_file(dst).problems == ()
    # ... and the changed store round-trips again, into a third file, exactly.
    changed = run("memory", "export", "--db", str(dst)).stdout
    with SQLiteKnowledgeStore(copy) as c:
        assert import_lines(c, changed.splitlines()).exact
        assert export_text(c) == changed
    assert check_file(copy).problems == ()


def test_the_restored_rows_get_vectors_from_the_configured_embedder(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3", embedder=HashEmbedder()) as a:
        ids = seed(a)
        text = export_text(a)
        with SQLiteKnowledgeStore(tmp_path / "b.sqlite3", embedder=HashEmbedder()) as b:
            assert import_lines(b, text.splitlines()).exact
            assert export_text(b) == text
            assert b.vectorless_count() == 0 and b.vector_space() == a.vector_space()
            assert b.vector_neighbours("Caroline went to the LGBTQ support group", 1) == [ids["said"]]
            same_reads(a, b)  # hybrid search: the same hits, ranks and relevance


def test_sqlite_to_in_memory_to_sqlite_is_exact(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3") as a:
        ids = seed(a)
        text = export_text(a)
        mem = InMemoryKnowledgeStore(consolidation=Consolidation(deduplicate=False, auto_supersede=False))
        assert import_lines(mem, text.splitlines()).exact
        assert export_text(mem) == text
        same_reads(a, mem, search=None)  # another backend: its own ranking
        for chunk in mem.list_chunks():
            restored_history(mem, chunk)
        assert int(mem.add_chunk("after the import")) == max(int(i) for i in ids.values()) + 1
        mem.invalidate_chunk(ids["later"], reason="cancelled")
        again = export_text(mem)
        with SQLiteKnowledgeStore(tmp_path / "b.sqlite3") as b:
            assert import_lines(b, again.splitlines()).exact
            assert export_text(b) == again
            assert b.get(ids["later"]).invalidation_reason == "cancelled"


def test_an_id_the_store_holds_is_refused_in_one_line_and_nothing_is_imported(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    with SQLiteKnowledgeStore(src) as store:
        seed(store)
    (tmp_path / "e.jsonl").write_text(run("memory", "export", "--db", str(src)).stdout, encoding="utf-8")
    with SQLiteKnowledgeStore(dst) as store:
        store.add_chunk("already here", source_type="operator")
    res = run("memory", "import", str(tmp_path / "e.jsonl"), "--db", str(dst), ok=False)
    assert res.exit_code != 0 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"error: {dst}: memory 1 is already in this store; an exact restore keeps ids")
    assert "`contextplane memory import --new-ids`" in res.stderr and "nothing was restored" in res.stderr
    with SQLiteKnowledgeStore(dst) as store:
        assert [c.content for c in store.list_chunks()] == ["already here"]
    # Merging is what --new-ids is for: every row in, renumbered, the old -> new map printed.
    out = run("memory", "import", str(tmp_path / "e.jsonl"), "--new-ids", "--db", str(dst)).stdout
    assert out.startswith("imported 14 memories with new ids (history starts at the import)\n  1 -> 2\n")


def test_a_purged_or_passed_id_is_refused_by_the_embedded_store(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3") as a:
        seed(a)
        rows = rows_of(export_text(a))
    with SQLiteKnowledgeStore(tmp_path / "b.sqlite3") as b:
        gone = b.add_chunk("to be purged")
        b.invalidate_chunk(gone, reason="x")
        b.purge(ids=[gone])
        with pytest.raises(StoreError, match=r"memory 1 was purged from this store \(its history keeps the id\)"):
            b.restore_chunks(rows)
        assert b.list_chunks() == []
        # Ids are handed out in order (as-of reads rely on it): one below the last is refused.
        assert b.restore_chunks([rows[-1]]) == [rows[-1]["id"]]
        with pytest.raises(StoreError, match=f"memory {rows[-2]['id']} is not above the largest id"):
            b.restore_chunks([rows[-2]])
        assert [c.id for c in b.list_chunks()] == [rows[-1]["id"]]
        assert check_file(b.path).problems == ()


def test_a_truncated_or_garbled_export_imports_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    with SQLiteKnowledgeStore(src) as store:
        seed(store)
    text = run("memory", "export", "--db", str(src)).stdout
    res = run("memory", "import", "-", "--db", str(dst), input=text[:-40], ok=False)  # cut mid-line
    assert res.exit_code == 2 and res.stderr.startswith("error: standard input line 15: not JSON")
    assert res.stderr.rstrip().endswith("nothing was imported") and not dst.exists()
    lines = text.splitlines()
    row = json.loads(lines[3])
    lines[3] = json.dumps({**row, "created_at": "last tuesday"})
    res = run("memory", "import", "-", "--db", str(dst), input="\n".join(lines) + "\n", ok=False)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"restore: row 2 (id '{row['id']}'): created_at: 'last tuesday' is not an ISO-8601 timestamp" in res.stderr
    assert "import with --new-ids" in res.stderr
    with SQLiteKnowledgeStore(dst) as store:
        assert store.list_chunks() == []


class _WithoutRestore:
    """A store offering the write API and no ``restore_chunks`` (a third-party store)."""

    def __init__(self, inner: InMemoryKnowledgeStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "restore_chunks":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_without_exact_restore_gets_new_ids_with_a_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3") as store:
        ids = seed(store)
        text = export_text(store)
    inner = InMemoryKnowledgeStore(consolidation=Consolidation(deduplicate=False, auto_supersede=False))
    inner.add_chunk("already here")  # so new ids differ from the exported ones

    @contextlib.contextmanager
    def backend(*_a: Any, **_k: Any) -> Iterator[tuple[Any, Any, Any]]:
        yield None, None, InMemoryBackend(memories=_WithoutRestore(inner))

    monkeypatch.setattr("contextplane.store.cli.command_backend", backend)
    res = run("memory", "import", "-", input=text)
    assert res.stderr == (
        "notice: _WithoutRestore cannot restore exactly (it has no restore_chunks), so it assigns new "
        "ids and times; supersessions are re-linked to them\n"
    )
    assert res.stdout.startswith("imported 14 memories with new ids (history starts at the import)\n  1 -> 2\n")
    new = {line.split(" -> ")[0].strip(): line.split(" -> ")[1] for line in res.stdout.splitlines()[1:]}
    assert inner.get(new[ids["v1"]]).superseded_by == new[ids["v2"]]  # the chain re-linked
    assert inner.get(new[ids["v3"]]).content == "Lee approves deploys"


def test_restore_refuses_bad_rows_before_writing(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3") as a:
        seed(a)
        rows = rows_of(export_text(a))
    store = InMemoryKnowledgeStore()
    for bad, message in (
        ({**rows[1], "id": "x1"}, "id: 'x1' is not a memory id"),
        ({**rows[1], "id": None}, "id: missing"),
        ({**rows[1], "review_state": "maybe"}, "review_state: 'maybe' is not one of"),
        ({**rows[1], "namespace": "team:x"}, "namespace: 'team:x' is not a scope"),
        ({**rows[1], "colour": "red"}, "colour: not a memory attribute"),
        (rows[0], "id 1 is given twice"),
    ):
        with pytest.raises(ValidationError, match=message):
            store.restore_chunks([rows[0], bad])
        assert store.list_chunks() == [] and store.history(rows[0]["id"]) == []


def test_a_restore_into_a_store_with_warm_caches_reads_as_a_cold_open(tmp_path: Path) -> None:
    """The term statistics and the vector matrix are cached per corpus version: a restore must
    move it, so the handle that searched before reads what a fresh handle on the file reads."""
    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3") as a:
        ids = seed(a)
        rows = rows_of(export_text(a))
    path = tmp_path / "b.sqlite3"
    with SQLiteKnowledgeStore(path, embedder=HashEmbedder()) as warm:
        warm.restore_chunks(rows[:5])
        for query in ("who approves deploys", "support group", "promo code"):
            warm.search(query)  # caches filled for the corpus of five rows
        warm.restore_chunks(rows[5:])
        with SQLiteKnowledgeStore(path, embedder=HashEmbedder()) as cold:
            same_reads(cold, warm)
        assert {h.chunk.id for h in warm.search("support group")} >= {ids["said"], ids["said2"]}


def test_a_restore_failing_after_its_inserts_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SQLiteKnowledgeStore(tmp_path / "a.sqlite3") as a:
        seed(a)
        rows = rows_of(export_text(a))
    with SQLiteKnowledgeStore(tmp_path / "b.sqlite3", embedder=HashEmbedder()) as b:
        kept = b.add_chunk("written before", source_type="operator")
        position = b.history_position().seq

        def broken(*_a: Any, **_k: Any) -> None:
            raise StoreError("the disk filled up while writing vectors")

        monkeypatch.setattr("contextplane.store.vector_index.add_vectors", broken)
        rows_above = [{**r, "id": str(int(r["id"]) + 100)} for r in rows]
        for r in rows_above:
            reason = r["invalidation_reason"] or ""
            if reason.startswith("superseded_by:"):
                r["invalidation_reason"] = f"superseded_by:{int(reason.split(':')[1]) + 100}"
        with pytest.raises(StoreError, match="the disk filled up"):
            b.restore_chunks(rows_above)
        assert [c.id for c in b.list_chunks()] == [kept] and b.history_position().seq == position
        monkeypatch.undo()
        assert b.restore_chunks(rows_above) == [r["id"] for r in rows_above]  # and it can be done again
        assert b.vectorless_count() == 0
    assert check_file(tmp_path / "b.sqlite3").problems == ()
