"""A turn's records are durable or reported (issue 26): ``projection.record_status`` says whether
the turn's records were kept, a failed record write is logged once and never fails the turn, and
``observability.records_durability`` decides how the embedded backend commits them.

The full disk is real: a child process lowers ``RLIMIT_FSIZE`` to the records file's current
size (``SIGXFSZ`` ignored, so a write past it fails with EFBIG as on a full disk) and composes
ten turns. Before the fix those turns composed and kept no injection row, and nothing on the
projection said so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from contextplane import (
    ContextSection,
    Envelope,
    Row,
    Shed,
    acompose_projected_context,
    compose_projected_context,
    hookimpl,
    plugin_host_with,
)
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.delivery import ModelCall
from contextplane.errors import SectionError, StoreError
from contextplane.observability import observer
from contextplane.records import InjectionRow
from contextplane.records.plans import write
from contextplane.testing.memory import InMemoryBackend, InMemoryInjectionLog, InMemorySnapshotStore

REPO = Path(__file__).resolve().parents[2]


class OneRow:
    plugin_name = "one_row"

    @hookimpl
    def register_context_sections(self, register: Any) -> None:
        register(
            ContextSection("one", 50, Shed.DROP_SECTION, lambda _r: [Row("r1", 1, "kiwi")], Envelope("one"))
        )


class FullDiskLog(InMemoryInjectionLog):
    def record(self, row: InjectionRow) -> int:
        raise StoreError("records.sqlite3: recording the injection log row failed: database or disk is full")


def turn(backend: Any, index: int = 1, **kw: Any) -> Any:
    return compose_projected_context(
        "kiwi",
        backend,
        session_id="s",
        turn_index=index,
        budget_tokens=500,
        host=kw.pop("host", None) or plugin_host_with([OneRow()]),
        **kw,
    )


FULL_DISK = textwrap.dedent(
    """
    import json, logging, os, resource, signal, sys
    from contextplane import compose_projected_context
    from contextplane.backends.sqlite import SQLiteBackend

    seen = []
    class Count(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage().splitlines()[0])
    logging.getLogger("contextplane").addHandler(Count())
    path = sys.argv[1]
    backend = SQLiteBackend(path)
    backend.memories.add_chunk("kiwi harvest starts in May", "fact", "operator")
    first = compose_projected_context("kiwi", backend, session_id="s", turn_index=0, budget_tokens=500)
    records = path.replace(".sqlite3", ".records.sqlite3")
    limit = max(os.path.getsize(records + suffix) for suffix in ("", "-wal"))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    turns = [
        compose_projected_context("kiwi", backend, session_id="s", turn_index=t, budget_tokens=500)
        for t in range(1, 11)
    ]
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    after = compose_projected_context("kiwi", backend, session_id="s", turn_index=11, budget_tokens=500)
    print(json.dumps({
        "first": first.record_status,
        "texts_equal": all(t.text == first.text for t in turns),
        "statuses": [t.record_status for t in turns],
        "after": after.record_status,
        "rows": [r.turn_index for r in backend.injections.rows("s")],
        "logged": seen,
    }))
    """
)


def test_turns_on_a_full_disk_compose_and_say_their_records_were_lost(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path / "memory.sqlite3")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["first"] == "recorded"
    assert out["texts_equal"], "a turn on a full disk composed something else"
    assert out["rows"] == [0, 11], "the full disk kept a row after all: the test proves nothing"
    for status in out["statuses"]:
        assert status.startswith("failed: storing the turn's injection-log row and inputs: "), status
        assert "memory.records.sqlite3" in status
    failures = [m for m in out["logged"] if "failed during observe_projection" in m]
    assert len(failures) == 1, out["logged"]  # ten failed turns, one log line
    assert out["after"] == "recorded"  # space again: recorded again


def test_the_status_of_recorded_previewed_incognito_and_unbacked_turns(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "memory.sqlite3")
    assert turn(backend).record_status == "recorded"
    assert turn(backend, 2, record=False).record_status == "not recorded"
    assert turn(backend, 3, incognito=True).record_status == "not recorded"
    assert [r.turn_index for r in backend.injections.rows("s")] == [1]
    assert turn(None, 4).record_status == "not recorded"
    backend.close()


def test_a_failed_record_write_is_reported_on_both_paths_and_raised_in_strict_mode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = InMemoryBackend(injections=FullDiskLog())
    with caplog.at_level(logging.WARNING, "contextplane"):
        sync = turn(backend)
        host = plugin_host_with([OneRow()])
        late = asyncio.run(
            acompose_projected_context(
                "kiwi", backend, session_id="s", turn_index=2, budget_tokens=500, host=host
            )
        )
    for p in (sync, late):
        assert p.text and p.record_status == (
            "failed: storing the turn's injection-log row and inputs: records.sqlite3: recording the "
            "injection log row failed: database or disk is full"
        )
    assert [
        r.getMessage().splitlines()[0] for r in caplog.records if "observe_projection" in r.getMessage()
    ] == [
        "plugin 'contextplane.records' (distribution contextplane) failed during observe_projection: "
        "StoreError: records.sqlite3: recording the injection log row failed: database or disk is full"
    ]
    with pytest.raises(SectionError, match="database or disk is full"):
        turn(backend, 3, host=plugin_host_with([OneRow()], strict=True))


def test_a_failed_snapshot_at_delivery_turns_a_recorded_turn_failed() -> None:
    class FullSnapshots(InMemorySnapshotStore):
        def put(self, row: Any) -> None:
            raise StoreError("snapshots: database or disk is full")

    backend = InMemoryBackend(snapshots=FullSnapshots())
    projection = turn(backend)
    assert projection.record_status == "recorded"
    assert projection.request is not None
    told = observer.observe_model_call(ModelCall(projection, 0, "prefix"), projection.request)
    assert told is not None  # the observer is sans-IO: it returns the rows, the host writes them
    with pytest.raises(StoreError):
        write(told.parts, told.plan)
    assert projection.record_status == (
        "failed: storing the prompt snapshot of model call 0: snapshots: database or disk is full"
    )


@pytest.mark.parametrize(
    ("durability", "synchronous", "fsync"), [("full", 1, False), ("relaxed", 1, False), ("fsync", 2, True)]
)
def test_records_durability_sets_how_the_embedded_records_commit(
    tmp_path: Path, durability: str, synchronous: int, fsync: bool
) -> None:
    config = structure({"observability": {"records_durability": durability}})
    backend = SQLiteBackend(tmp_path / "memory.sqlite3", config=config)
    assert turn(backend, config=config).record_status == "recorded"
    for part in (backend.injections, backend.snapshots, backend.summaries):
        assert part._conn.execute("PRAGMA synchronous").fetchone()[0] == synchronous
    assert backend.memories.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # memories: WAL, NORMAL
    assert backend.trajectory is not None and backend.trajectory.fsync is fsync
    backend.close()
