"""Recording a turn must not slow the next read (issue 11): the per-turn records live in a
records file beside the memory store, and rows an earlier version kept in the memory file are
adopted once."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
from click.testing import CliRunner

from contextplane import PluginHost, compose_projected_context, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend, SQLiteInjectionLog, records_path
from contextplane.backends.sqlite.injections import SCHEMA as INJECTION_SCHEMA
from contextplane.cli import main
from contextplane.config import structure
from contextplane_sections import always_on, retrieved, working_state


def host() -> PluginHost:
    return plugin_host_with([working_state, always_on, retrieved], structure({"context": {"context_window": 200_000}}))


def test_records_path_sits_beside_the_store(tmp_path: Path) -> None:
    assert records_path(tmp_path / "memory.sqlite3") == str(tmp_path / "memory.records.sqlite3")
    assert records_path(tmp_path / "store") == str(tmp_path / "store.records")
    assert records_path(":memory:") == ":memory:"


def test_a_recorded_turn_leaves_the_memory_file_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    backend = SQLiteBackend(path)
    backend.memories.add_chunk("Deploy window: Tuesday 14:00 UTC.", "hot", "operator")
    backend.memories.add_chunk("the deploy checklist lives in the wiki")
    reader = apsw.Connection(str(path))
    # data_version changes when another connection commits to the file: what empties a
    # reader's page cache before its next read
    before = reader.execute("PRAGMA data_version").fetchone()[0]
    for turn in range(3):
        projection = compose_projected_context(
            "when is the deploy window?", backend, None, {"goal": "ship"}, session_id="s", turn_index=turn,
            host=host(),
        )
        assert projection.delivered_ids["retrieved"]
    assert reader.execute("PRAGMA data_version").fetchone()[0] == before
    rows = backend.injections.rows("s")
    assert [r.turn_index for r in rows] == [0, 1, 2]
    assert Path(records_path(path)).exists()
    assert reader.execute("SELECT count(*) FROM sqlite_master WHERE name = 'injection_log'").fetchone() == (0,)
    reader.close()
    backend.close()


def test_rows_an_earlier_version_kept_in_the_memory_file_are_adopted_once(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    backend = SQLiteBackend(path)
    backend.memories.add_chunk("a memory")
    legacy = apsw.Connection(str(path))
    legacy.execute(INJECTION_SCHEMA)
    legacy.execute(
        "INSERT INTO injection_log(session_id, turn_index, at, mode, approx_tokens, used_chars, budget_chars, "
        "delivered) VALUES ('old', 4, '2025-01-01T00:00:00Z', 'native', 12, 48, NULL, ?)",
        (json.dumps({"retrieved": ["1"]}),),
    )
    legacy.close()
    [row] = backend.injections.rows("old")
    assert (row.turn_index, row.delivered) == (4, {"retrieved": ["1"]})
    backend.close()
    # a second open (and the CLI) adopts nothing twice; the old table is left as it was
    again = SQLiteInjectionLog(records_path(path), adopt_from=path)
    assert len(again.rows("old")) == 1
    again.close()
    result = CliRunner().invoke(main, ["injections", "--db", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert [r["session_id"] for r in json.loads(result.output)] == ["old"]
    check = apsw.Connection(str(path))
    assert check.execute("SELECT count(*) FROM injection_log").fetchone() == (1,)
    check.close()
