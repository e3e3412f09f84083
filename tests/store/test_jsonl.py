"""``memory export`` / ``memory import`` (issue 23): every attribute round-trips through JSON
Lines; what the importing store assigns anew and where history starts are stated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from contextplane.cli import main
from contextplane.memory.consolidation import Consolidation
from contextplane.memory.model import MemoryChunk
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.jsonl import ASSIGNED_AT_IMPORT, CARRIED, import_lines
from contextplane.testing.memory import InMemoryKnowledgeStore


def run(*args: str, ok: bool = True, input: str | None = None) -> Any:
    result = CliRunner().invoke(main, list(args), input=input, prog_name="contextplane")
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def seed(store: Any) -> None:
    """A row of every shape: kinds, policies, review states, scopes, expiry (past and future),
    a supersession chain, an invalidation with a reason, free-text attributes."""
    add = store.add_chunk
    add("Deploy window Tuesday", memory_kind="fact", delivery_policy="always", namespace="project:web",
        heading="Deploys", source="runbook.md", subject="deploy-window", epoch="2026Q4")
    add("Prefers short answers", memory_kind="profile", review_state="pending", source_type="extracted")
    old = add("Priya approves deploys", memory_kind="fact", subject="approver")
    store.supersede(old, "Sam approves deploys")
    add("A rejected note", memory_kind="note", source_type="agent", review_state="rejected")
    add("Expired promo", expires_at="2020-01-01T00:00:00Z", domain="hot")
    add("Expires later", expires_in_days=30, namespace="session:s1")
    gone = add("Wrong fact", memory_kind="fact")
    store.invalidate_chunk(gone, reason="it was wrong")
    add("Ünïcode ✓ text\nwith two lines", memory_kind="reference", source_type="ingest")


def rows(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    head, *body = [json.loads(line) for line in text.splitlines()]
    return head, body


def comparable(row: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """A row with the attributes the import assigns anew set aside (whether it is invalidated
    is kept), and a supersession's target mapped to the new id."""
    out = {k: v for k, v in row.items() if k not in ASSIGNED_AT_IMPORT}
    out["invalidated"] = row["invalidated_at"] is not None
    reason = out.get("invalidation_reason") or ""
    if reason.startswith("superseded_by:"):
        out["invalidation_reason"] = "superseded_by:" + ids[reason.removeprefix("superseded_by:")]
    return out


def test_new_ids_import_carries_every_other_attribute(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    with SQLiteKnowledgeStore(src) as store:
        seed(store)
    first = run("memory", "export", "--db", str(src)).stdout
    head, before = rows(first)
    assert head["contextplane_export"] == 1 and head["rows"] == len(before) == 9
    assert head["attributes"] == list(CARRIED) == [f.name for f in attrs.fields(MemoryChunk)]
    assert head["exact_import_keeps"] == list(CARRIED)
    assert head["new_id_import_assigns"] == ["id", "created_at", "updated_at", "invalidated_at"]
    assert "keeps every attribute, ids and times included" in head["import"] and "--new-ids" in head["import"]
    assert head["history"].startswith("not carried: an imported row's lifecycle history starts at its import")
    (tmp_path / "e.jsonl").write_text(first, encoding="utf-8")
    out = json.loads(
        run("memory", "import", str(tmp_path / "e.jsonl"), "--new-ids", "--db", str(dst), "--json").stdout
    )
    ids = out["ids"]
    assert out["imported"] == 9 and out["exact"] is False and list(ids) == [r["id"] for r in before]
    second = run("memory", "export", "--db", str(dst)).stdout
    _, after = rows(second)
    assert [comparable(r, ids) for r in before] == [
        comparable(r, {v: v for v in ids.values()}) for r in after
    ]
    assert [ids[r["id"]] for r in before] == [r["id"] for r in after]
    with SQLiteKnowledgeStore(dst) as store:
        assert store.history(ids["1"])[0].event == "created"  # history starts at the import
        found = [h.chunk.content for h in store.search("who approves deploys")]
        assert found[0] == "Sam approves deploys" and "Priya approves deploys" not in found  # superseded
    # ... and into another backend (the in-memory reference), from the same lines.
    kit = InMemoryKnowledgeStore(consolidation=Consolidation(deduplicate=False, auto_supersede=False))
    imported = import_lines(kit, first.splitlines(), new_ids=True)
    assert [
        comparable({k: v for k, v in json.loads(json.dumps(c.to_dict())).items() if k in CARRIED},
                   {v: v for v in imported.ids.values()})
        for c in kit.list_chunks()
    ] == [comparable(r, dict(imported.ids)) for r in before]


def test_a_bad_export_line_is_named_and_nothing_is_imported(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite3"
    header = json.dumps({"contextplane_export": 1})
    bad = header + "\n" + json.dumps({"content": "ok"}) + "\n" + json.dumps({"content": "x", "colour": "red"}) + "\n"
    res = run("memory", "import", "-", "--db", str(db), input=bad, ok=False)
    assert res.exit_code == 2 and res.stderr.startswith(
        "error: standard input line 3: unknown attribute 'colour' (a memory has: id, content,"
    ) and res.stderr.rstrip().endswith("nothing was imported")
    assert not db.exists()
    res = run("memory", "import", "-", "--db", str(db), input='{"content": "no header"}\n', ok=False)
    assert "no export header" in res.stderr and not db.exists()


def test_memory_purge_deletes_one_row_and_keeps_the_chain(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    with SQLiteKnowledgeStore(db) as store:
        keep = store.add_chunk("keep me")
        doomed = store.add_chunk("my address is 1 Main St")
        other = store.add_chunk("already invalid")
        store.invalidate_chunk(other, reason="stale")  # purgeable too, but not named: stays
        old = store.add_chunk("v1", subject="s")
        new = store.add_chunk("v2", subject="s")
    assert run("memory", "purge", doomed, "--db", db).stdout == f"purged {doomed}\n"
    for chunk_id, why in ((old, "is superseded by"), (new, "superseded another row")):
        res = run("memory", "purge", chunk_id, "--db", db, ok=False)
        assert res.exit_code == 2 and why in res.stderr and "nothing was purged" in res.stderr
    res = run("memory", "purge", "999", "--db", db, ok=False)
    assert res.stderr == "error: no memory with id '999'; nothing was purged\n"
    with SQLiteKnowledgeStore(db) as store:
        assert store.get(doomed) is None and store.get(keep) is not None and store.get(other) is not None
        assert store.get(new).invalidated_at is None  # refused before anything changed
        assert [e.event for e in store.history(doomed)] == ["created", "invalidated", "purged"]


@pytest.mark.parametrize("make", [InMemoryKnowledgeStore], ids=["memory"])
def test_purge_by_id_on_the_reference_store(make: Any) -> None:
    store = make()
    a, b = store.add_chunk("a"), store.add_chunk("b")
    store.invalidate_chunk(a, reason="x")
    store.invalidate_chunk(b, reason="y")
    assert store.purge(ids=[a]) == 1 and store.get(a) is None and store.get(b) is not None
