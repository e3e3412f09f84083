"""``contextplane store copy`` carries each prompt snapshot's cacheable-prefix figures (issue
24): recorded through a runtime on the embedded store, copied into PostgreSQL, they read back
the same through the snapshot store and through ``contextplane snapshots show/list``. A source
from before those columns (its records file opened read-only, so never given them) copies its
snapshots with the figures NULL: unknown on PostgreSQL too, never a guess."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import apsw
import attrs
from click.testing import CliRunner

from contextplane import plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.backends.sqlite.connection import records_path
from contextplane.backends.sqlite.snapshots import CACHE_COLUMNS
from contextplane.cli import main
from contextplane.config import structure
from contextplane.delivery import PLAIN
from contextplane.records.snapshots import SnapshotRow
from contextplane.runtime import open_runtime
from contextplane_postgres import PostgresBackend

PREFIX = "You are a careful assistant for the orchard team. " * 40
#: Put directly: an unknown share (the process had not seen the call before), a row written
#: without figures (as before issue 24), and a share broken by a named section.
UNKNOWN = SnapshotRow(
    "t", 0, 0, 1.9e9, "native", False, None, "[]", None, "[]", None, 0, 2, 20, "[]", "[]", None,
    "c" * 64, 420, None, '{"unknown":true}',
)  # fmt: skip
WITHOUT = attrs.evolve(
    UNKNOWN, turn_index=1, cache_prefix_sha256=None, cache_prefix_chars=None, cache_break=None
)
BROKEN = attrs.evolve(UNKNOWN, turn_index=2, cache_shared_chars=380, cache_break='{"sections":["tools"]}')
KEYS = (("s", 0), ("s", 1), ("s", 2), ("t", 0), ("t", 1), ("t", 2))


def _record(path: Path) -> None:
    """Three recorded calls of session "s" (its first, then two unchanged), plus the rows above."""
    backend = SQLiteBackend(path)
    try:
        host = plugin_host_with([], structure({"context": {"context_window": 200_000}}))
        history: list[dict[str, str]] = []
        with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
            for n in range(3):
                turn = runtime.compose(runtime.request(f"q{n}", session_id="s", turn_index=n))
                history.append({"role": "user", "content": f"question {n}"})
                runtime.deliver(turn, history, PLAIN, call_index=0)
                history.append({"role": "assistant", "content": f"answer {n}"})
        backend.snapshots.put(UNKNOWN)
        backend.snapshots.put(WITHOUT)
        backend.snapshots.put(BROKEN)
        backend.snapshots.flush()
    finally:
        backend.close()


def _store_copy(src: Path, pg_url: str, pg_schema: str) -> Any:
    """``contextplane store copy SRC URL --schema S --json``: what it reports."""
    done = CliRunner().invoke(main, ["store", "copy", str(src), pg_url, "--schema", pg_schema, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def _config(tmp_path: Path, pg_url: str, pg_schema: str) -> Path:
    cfg = tmp_path / "pg.toml"
    cfg.write_text(
        f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n[plugin.postgres]\nschema = "{pg_schema}"\n'
    )
    return cfg


def _cache_lines(*where: str) -> dict[tuple[str, int], str | None]:
    """Each snapshot's "cacheable prefix" line as ``contextplane snapshots show`` prints it
    (None: it prints none), and the list's cell, for the snapshots at ``where``."""
    out: dict[tuple[str, int], str | None] = {}
    runner = CliRunner()
    for session, turn in KEYS:
        shown = runner.invoke(main, ["snapshots", "show", session, str(turn), *where])
        assert shown.exit_code == 0, shown.output
        found = re.search(r"^== (cacheable prefix: .*)$", shown.output, re.MULTILINE)
        out[(session, turn)] = None if found is None else found.group(1)
    listed = runner.invoke(main, ["snapshots", "list", *where])
    assert listed.exit_code == 0, listed.output
    out[("list", 0)] = "\n".join(line.rsplit("  ", 1)[-1] for line in listed.output.splitlines()[2:])
    return out


def test_the_copy_carries_the_cacheable_prefix(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    src = tmp_path / "memory.sqlite3"
    _record(src)
    source = SQLiteBackend(src)
    try:
        before = {s.key: s.cache for s in source.snapshots.list()}
    finally:
        source.close()
    assert before[("s", 0, 0)] is not None and before[("s", 0, 0)].first
    assert before[("s", 2, 0)] is not None and before[("s", 2, 0)].unchanged
    assert before[("t", 0, 0)] is not None and before[("t", 0, 0)].shared is None
    assert before[("t", 1, 0)] is None
    assert _store_copy(src, pg_url, pg_schema)["tables"]["prompt_snapshots"]["copied"] == 6
    copied = PostgresBackend(pg_url, schema=pg_schema, pool_max_size=2)
    try:
        after = {s.key: s.cache for s in copied.snapshots.list()}
        assert after == before
        one = copied.snapshots.get("s", 1, 0)
        assert one is not None and one.cache == before[("s", 1, 0)]
        copied.snapshots.put(attrs.evolve(BROKEN, session_id="u"))  # the copy takes new figures
        copied.snapshots.flush()
        new = copied.snapshots.get("u", 2, 0)
        assert new is not None and new.cache is not None and new.cache.sections == ("tools",)
    finally:
        copied.close()
    on_source = _cache_lines("--db", str(src))
    # the copy's new row "u" is BROKEN's figures again: the same cell as ("t", 2)'s, listed last
    on_source[("list", 0)] += "\n" + on_source[("list", 0)].splitlines()[-1]
    on_copy = _cache_lines("--config", str(_config(tmp_path, pg_url, pg_schema)))
    assert on_copy == on_source
    assert on_copy[("s", 1)] is not None and "unchanged since the previous call" in on_copy[("s", 1)]
    assert on_copy[("t", 0)] is not None and "share with the previous call unknown" in on_copy[("t", 0)]
    assert on_copy[("t", 1)] is None  # recorded without figures: no line, not a made-up one
    assert on_copy[("t", 2)] is not None and "broken by section 'tools'" in on_copy[("t", 2)]


def _drop_cache_columns(records: Path) -> None:
    """The records file as a contextplane before issue 24 left it: no cacheable-prefix columns."""
    conn = apsw.Connection(str(records))
    try:
        for name, _type in CACHE_COLUMNS:
            conn.execute(f"ALTER TABLE prompt_snapshots DROP COLUMN {name}")
    finally:
        conn.close()


def _columns(path: Path) -> set[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {str(r[1]) for r in conn.execute("PRAGMA table_info(prompt_snapshots)")}
    finally:
        conn.close()


def test_a_source_from_before_the_columns_copies_them_as_unknown(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    src = tmp_path / "memory.sqlite3"
    _record(src)
    records = Path(records_path(src))
    _drop_cache_columns(records)
    assert not {name for name, _type in CACHE_COLUMNS} & _columns(records)
    assert _store_copy(src, pg_url, pg_schema)["tables"]["prompt_snapshots"]["copied"] == 6
    assert not {name for name, _type in CACHE_COLUMNS} & _columns(records)  # the source left as it was
    copied: Any = PostgresBackend(pg_url, schema=pg_schema, pool_max_size=2)
    try:
        snaps = copied.snapshots.list()
        assert [s.key[:2] for s in snaps] == list(KEYS)
        assert all(s.cache is None for s in snaps), [s.cache for s in snaps]
        assert snaps[1].history_chars > 0 and snaps[1].prefix_sha256  # the rest of each row came along
        copied.snapshots.put(attrs.evolve(UNKNOWN, session_id="u"))  # and the copy takes new figures
        copied.snapshots.flush()
        got = copied.snapshots.get("u", 0, 0)
        assert (
            got is not None and got.cache is not None and got.cache.chars == 420 and got.cache.shared is None
        )
    finally:
        copied.close()
    shown = _cache_lines("--config", str(_config(tmp_path, pg_url, pg_schema)))
    assert [shown[k] for k in KEYS] == [None] * len(KEYS)
    assert shown[("list", 0)].splitlines()[: len(KEYS)] == ["-"] * len(KEYS)  # "u" is last
