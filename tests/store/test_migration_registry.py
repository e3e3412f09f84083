"""The migration registry (``contextplane.store.migrations.registry``): its steps run from the
oldest supported schema version to the current one with no gap, a store at every older version
opens through them and then takes every public read and write (the round-trip rule), and the old
import path ``contextplane.store.migrate`` still reaches the code a patch on it is meant for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from contextplane.store import SQLiteKnowledgeStore
from contextplane.store import migrate as m
from contextplane.store.check import check_file
from contextplane.store.migrations import read_path, registry
from contextplane.store.migrations.registry import STEPS
from contextplane.store.migrations.state import OLDEST_VERSION, SCHEMA_VERSION
from tests.store.helpers import make_v1_store, make_v2_store
from tests.store.test_event_time import _as_schema_4
from tests.store.test_v3_conversion import build_fresh


def test_the_steps_run_from_the_oldest_version_to_the_current_one_without_a_gap() -> None:
    assert [step.version for step in STEPS] == list(range(OLDEST_VERSION + 1, SCHEMA_VERSION + 1))
    columns = [name for step in STEPS for name, _ in step.columns]
    assert len(columns) == len(set(columns)), "two steps add the same column"
    passes = [name for step in STEPS for name in step.passes]
    assert passes == [*m.PASSES, *m.V3_PASSES]
    assert STEPS[-1].ensure is None, "the newest step's objects come with the version stamp"


def test_a_new_store_has_every_steps_columns_and_markers(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    SQLiteKnowledgeStore(path).close()
    conn = apsw.Connection(str(path))
    try:
        assert m.schema_version(conn) == SCHEMA_VERSION
        assert {n for step in STEPS for n, _ in step.columns} <= m.column_names(conn, "chunks")
        assert all(m.meta_get(conn, p) is not None for step in STEPS for p in step.passes)
    finally:
        conn.close()


def _v1(path: Path) -> None:
    make_v1_store(
        path,
        [
            ("Deploy window is Tuesday", "hot", "operator"),
            ("The deploy tool is Jenkins", "fact", "operator"),
            ("Standup is at 09:30", "general", "conversation"),
        ],
    )


def _v2(path: Path) -> None:
    unset = (None, None, None)  # expires_at, invalidated_at, invalidation_reason
    make_v2_store(
        path,
        [
            ("Deploy window is Tuesday", "hot", "operator", "standing", "always", "confirmed", "", "deploys", *unset),
            ("The deploy tool is Jenkins", "fact", "operator", "fact", None, "confirmed", "", "tool", *unset),
        ],
    )


def _v3(path: Path) -> None:
    build_fresh(path).close()


def _v4(path: Path) -> None:
    with SQLiteKnowledgeStore(path) as store:
        store.add_chunk("Deploy window is Tuesday", source_type="operator", subject="deploys")
        store.add_chunks([{"content": "The deploy tool is Jenkins", "source_type": "extracted"}])
    _as_schema_4(path)


BUILDERS: dict[int, Callable[[Path], None]] = {1: _v1, 2: _v2, 3: _v3, 4: _v4}


def test_there_is_a_store_builder_for_every_older_version() -> None:
    assert sorted(BUILDERS) == list(range(OLDEST_VERSION, SCHEMA_VERSION))


def exercise(store: SQLiteKnowledgeStore) -> None:
    """Every public read and write on a store opened from an older version."""
    rows = store.list_chunks()
    assert rows, "the old store's rows read back"
    first = next(c for c in rows if "deploy" in c.content.lower() and c.invalidated_at is None)
    assert store.get(first.id) == first
    assert first.id in {h.chunk.id for h in store.search("deploy", 20)}
    with store.consistent_read() as view:
        assert view.get(first.id) == first
    assert store.history(first.id), "every old row has a history"
    position = store.history_position()
    new = store.add_chunk("kiwi written after the migration", source_type="operator")
    one, two = store.add_chunks([{"content": "kiwi batch one"}, {"content": "kiwi batch two"}])
    assert store.get(new).content == "kiwi written after the migration"  # type: ignore[union-attr]
    assert {new, one, two} <= {c.id for c in store.list_chunks()}
    state = "rejected" if first.review_state == "confirmed" else "confirmed"
    assert store.set_review_state(first.id, state, by="t").review_state == state
    assert store.set_expires_at(two, "2099-01-01T00:00:00Z").expires_at is not None
    successor = store.supersede(new, "kiwi rewritten after the migration")
    assert store.get(new).superseded_by == successor  # type: ignore[union-attr]
    store.invalidate_chunk(one, reason="wrong")
    assert store.purge() >= 1 and store.get(one) is None
    with store.as_of(position) as past:
        assert past.get(new) is None
        assert past.get(first.id).review_state == first.review_state  # type: ignore[union-attr]
    assert [e.event for e in store.history(new)] == ["created", "superseded"]
    assert store.history(first.id)[-1].event == "review"


@pytest.mark.parametrize("version", sorted(BUILDERS))
def test_a_store_at_every_older_version_opens_and_takes_every_read_and_write(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / f"v{version}.sqlite3"
    BUILDERS[version](path)
    conn = apsw.Connection(str(path))
    try:
        assert m.schema_version(conn) == version, "the builder wrote another version"
    finally:
        conn.close()
    with SQLiteKnowledgeStore(path) as store:
        assert m.schema_version(store.conn) == SCHEMA_VERSION
        exercise(store)
    report = check_file(path)  # integrity, and every row's history as the history reads it
    assert report.ok, report.problems
    conn = apsw.Connection(str(path))
    try:
        assert m.ensure_schema(conn, str(path)).changed is False
    finally:
        conn.close()


def test_a_patch_on_the_old_module_reaches_the_code_that_reads_the_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = registry.repair_nonpositive_ids
    monkeypatch.setattr(m, "INLINE_STEMMING_MAX_ROWS", 7)
    monkeypatch.setattr(m, "repair_nonpositive_ids", lambda _conn: 0)
    monkeypatch.setattr(m, "_meta_get", lambda _conn, _key: "patched")  # a private name, renamed
    assert read_path.INLINE_STEMMING_MAX_ROWS == 7
    assert registry.repair_nonpositive_ids is not real
    assert read_path.meta_get(None, "x") == "patched"  # type: ignore[arg-type]
    monkeypatch.undo()
    assert read_path.INLINE_STEMMING_MAX_ROWS == m.INLINE_STEMMING_MAX_ROWS == 50_000
    assert registry.repair_nonpositive_ids is real is m.repair_nonpositive_ids
    assert read_path.meta_get is m.meta_get is m._meta_get
