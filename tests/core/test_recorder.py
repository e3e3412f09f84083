"""The recorder is sans-IO (issue 25, step 2): a projection and a model call become rows with no
backend at all, and the sync and the event-loop writers write the same rows.

Before, each row was built where it was written, twice (``PromptRecorder.capture`` and
``acapture``, ``observe_*`` and ``aobserve_*``), so what a turn records could not be read
without a store to record it into.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

from contextplane import (
    ContextSection,
    Envelope,
    Row,
    Shed,
    compose_projected_context,
    hookimpl,
    plugin_host_with,
)
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.delivery import PLAIN, placed
from contextplane.observability.trajectory import TrajectoryWriter
from contextplane.observability.writer import awrite, write
from contextplane.recorder import Recorder, injection_row, rows_of
from contextplane.records import InjectionRow, SnapshotRow, TurnInputs
from contextplane.testing.memory import InMemoryBackend, InMemoryInjectionLog, InMemorySnapshotStore
from contextplane.types import ModelCall, ProjectedContext, StablePrefix

PREFIX = StablePrefix("You are the deploy assistant.", ())
NOW = 1_700_000_000.5


class Kiwi:
    plugin_name = "kiwi_rows"

    @hookimpl
    def register_context_sections(self, register: Any) -> None:
        rows = [Row("k1", 1, "kiwi harvest starts in May"), Row("k2", 2, "deploy window is Friday")]
        register(ContextSection("kiwi", 50, Shed.DROP_ROWS, lambda _r: rows, Envelope("kiwi")))


def projection(*, incognito: bool = False, session: str = "s") -> ProjectedContext:
    """A composed turn with no backend (nothing is written while composing it)."""
    cfg = structure({"context": {"capture_full_text": True}})
    return compose_projected_context(
        "when is the deploy window?",
        None,
        session_id=session,
        turn_index=3,
        budget_tokens=2_000,
        state={"goal": "ship"},
        incognito=incognito,
        host=plugin_host_with([Kiwi()], cfg),
    )


def call_of(p: ProjectedContext, index: int = 0) -> ModelCall:
    history = [{"role": "user", "content": "hi"}, {"role": "user", "content": "old", "context_frame": True}]
    return placed(p, history, PREFIX, index, PLAIN).call


@contextmanager
def no_io() -> Iterator[list[str]]:
    """Every file, socket or database the block opens, by audit event (an audit hook cannot be
    removed, so it reads a flag)."""
    seen: list[str] = []
    watching = [True]

    def hook(event: str, _args: Any) -> None:
        if watching[0] and (event in ("open", "os.open") or event.startswith(("socket.", "sqlite3."))):
            seen.append(event)

    sys.addaudithook(hook)
    try:
        yield seen
    finally:
        watching[0] = False


def test_a_projection_and_a_model_call_become_rows_with_no_backend_and_no_io() -> None:
    p = projection()
    assert p.request is not None
    recorder = Recorder(trajectory=True, capture_full_text=True, clock=lambda: NOW)
    with no_io() as opened:
        turn_rows, turn = rows_of(recorder.projection(p, p.request, config=("{}", "cfgsha")), refs=["7"])
        call_rows, same = rows_of(recorder.call(call_of(p), turn), refs=["8"])
        again, _ = rows_of(recorder.call(call_of(p, 1), turn))
    assert opened == []

    # the composition: the injection-log row, the trajectory entry, the turn inputs
    assert [(w.part, w.method) for w in turn_rows] == [
        ("injections", "record"),
        ("trajectory", "append"),
        ("snapshots", "put_inputs"),
    ]
    (row,) = turn_rows[0].args
    assert isinstance(row, InjectionRow)
    assert (row.session_id, row.turn_index, row.mode) == ("s", 3, p.mode)
    assert row.delivered == {"kiwi": ["k1", "k2"]} and row.used_chars == p.used_chars
    assert row == injection_row(p)
    session, kind, entry = turn_rows[1].args
    assert (session, kind) == ("s", "projection")
    assert entry["text"] == p.text and entry["query"] == "when is the deploy window?"
    assert [s["ids"] for s in entry["sections"]] == [["k1", "k2"]]
    (inputs,) = turn_rows[2].args
    assert isinstance(inputs, TurnInputs)
    assert inputs.trajectory_ref == "7" and inputs.created_at == NOW
    assert (inputs.config, inputs.config_sha256) == ("{}", "cfgsha")
    assert json.loads(inputs.state) == {"goal": "ship"}
    assert turn is not None and turn.trajectory_ref == "7" and turn.text == p.text

    # the first call: the prefix once (text and trajectory entry), then the snapshot
    assert [(w.part, w.method) for w in call_rows] == [
        ("snapshots", "register_prefix"),
        ("trajectory", "append"),
        ("snapshots", "put"),
    ]
    assert call_rows[0].args == (PREFIX.sha256, PREFIX.text, "[]")
    assert call_rows[1].args == ("s", "stable_prefix", {"sha256": PREFIX.sha256, "text": PREFIX.text})
    (snap,) = call_rows[2].args
    assert isinstance(snap, SnapshotRow)
    assert snap.key == ("s", 3, 0) and snap.created_at == NOW
    assert snap.projection_sha256 == turn.projection_sha256 and snap.prefix_sha256 == PREFIX.sha256
    assert json.loads(snap.trajectory_refs) == ["8", "7"]
    assert snap.history_messages == 1 and [f["chars"] for f in json.loads(snap.stripped)] == [3]
    assert snap.full_text is not None and snap.full_text.startswith(f"[system]\n{PREFIX.text}")
    assert same is turn
    # the second call of the session: the prefix is remembered, one row only
    assert [(w.part, w.method) for w in again] == [("snapshots", "put")]
    assert json.loads(again[0].args[0].trajectory_refs) == ["8", "7"]


def test_an_incognito_call_rows_carry_no_text_and_no_hashes() -> None:
    p = projection(incognito=True)
    recorder = Recorder(trajectory=True, capture_full_text=True, clock=lambda: NOW)
    rows, turn = rows_of(recorder.call(call_of(p), None), refs=["1"])
    assert [(w.part, w.method) for w in rows] == [
        ("trajectory", "append"),  # the turn's entry, never written at composition
        ("snapshots", "register_prefix"),
        ("snapshots", "put"),
    ]
    assert "text" not in rows[0].args[2] and "query" not in rows[0].args[2]
    assert rows[1].args == (PREFIX.sha256, None, "[]")
    (snap,) = rows[2].args
    assert snap.incognito and snap.full_text is None and snap.projection_sha256 is None
    assert all(s["sha256"] is None for s in json.loads(snap.projection))
    assert turn.incognito and turn.text == ""


# --- the sync and the event-loop writers ---------------------------------------------------


class NativeLog(InMemoryInjectionLog):
    """An injection log with an async client of its own: awaited on the loop."""

    def __init__(self, threads: list[str]) -> None:
        super().__init__()
        self.threads = threads

    def record(self, row: InjectionRow) -> int:
        self.threads.append(f"record in {threading.current_thread().name}")
        return super().record(row)


class ThreadedSnapshots(InMemorySnapshotStore):
    """A snapshot store whose async forms would be thread hops (as the embedded SQLite one's)."""

    threaded_async = True

    def __init__(self, threads: list[str] | None = None) -> None:
        super().__init__()
        self.threads = threads if threads is not None else []

    def put_inputs(self, inputs: TurnInputs) -> None:
        self.threads.append(f"put_inputs in {threading.current_thread().name}")
        super().put_inputs(inputs)


def _sqlite(path: Path) -> Any:
    return SQLiteBackend(path / "memory.sqlite3")


def _memory(path: Path) -> Any:
    return InMemoryBackend(trajectory=TrajectoryWriter(path / "trajectory"))


def _mixed(path: Path) -> Any:
    return InMemoryBackend(injections=NativeLog([]), snapshots=ThreadedSnapshots())


def _what_was_written(backend: Any) -> list[Any]:
    injections = [attrs.evolve(r, id=0) for r in backend.injections.rows()]
    trajectory = (
        []
        if backend.trajectory is None
        else [{k: v for k, v in e.data.items() if k != "at"} for e in backend.trajectory.read("s").entries]
    )
    return [
        injections,
        backend.snapshots.list(),
        backend.snapshots.list_inputs(),
        backend.snapshots.prefix_text(PREFIX.sha256),
        trajectory,
    ]


def _record(backend: Any, p: ProjectedContext, *, loop: bool) -> None:
    """One composition and two model calls, through one writer."""
    assert p.request is not None
    recorder = Recorder(trajectory=backend.trajectory is not None, capture_full_text=True, clock=lambda: NOW)

    def run(plan: Any) -> Any:
        return asyncio.run(awrite(backend, plan)) if loop else write(backend, plan)

    turn = run(recorder.projection(p, p.request, config=("{}", "cfgsha")))
    for n in range(2):  # the calls share the turn the composition built
        turn = run(recorder.call(call_of(p, n), turn))


@pytest.mark.parametrize("make", [_sqlite, _memory, _mixed], ids=["sqlite", "memory", "mixed"])
def test_the_sync_and_the_async_writer_write_the_same_rows(tmp_path: Path, make: Any) -> None:
    p = projection()
    sync_backend, async_backend = make(tmp_path / "sync"), make(tmp_path / "async")
    _record(sync_backend, p, loop=False)
    _record(async_backend, p, loop=True)
    written = _what_was_written(sync_backend)
    assert written[0] and written[1] and written[2] and written[3] == PREFIX.text
    assert written == _what_was_written(async_backend)
    if make is _memory:  # the trajectory kept: entries for the turn and the prefix
        assert [e["kind"] for e in written[4]] == ["projection", "stable_prefix"]
    for backend in (sync_backend, async_backend):
        backend.close()


def test_the_async_writer_awaits_native_writes_on_the_loop_and_hops_once_for_the_rest() -> None:
    threads: list[str] = []
    snapshots = ThreadedSnapshots(threads)
    backend = InMemoryBackend(injections=NativeLog(threads), snapshots=snapshots)
    p = projection()
    assert p.request is not None

    async def main() -> str:
        await awrite(backend, Recorder(clock=lambda: NOW).projection(p, p.request))
        return threading.current_thread().name

    loop_thread = asyncio.run(main())
    injection, inputs = threads
    assert injection == f"record in {loop_thread}"  # the native log's arecord, on the loop
    assert inputs.startswith("put_inputs in ") and inputs != f"put_inputs in {loop_thread}"
    assert backend.snapshots.list_inputs()[0].query == "when is the deploy window?"


class CountingSnapshots(InMemorySnapshotStore):
    def __init__(self) -> None:
        super().__init__()
        self.registered: list[str] = []

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        self.registered.append(sha256)
        super().register_prefix(sha256, text, sections_json)


def test_a_runtime_hands_each_turn_its_one_recorder() -> None:
    """The runtime chooses the recorder when it composes (for its backend and the request's
    policy), and every turn's records are built with it: the prefix is registered once for the
    session however many turns and calls deliver it."""
    from contextplane import Runtime

    backend = InMemoryBackend(snapshots=CountingSnapshots())
    runtime = Runtime(host=plugin_host_with([Kiwi()]), backend=backend, prefix=PREFIX)
    turns = [runtime.compose(runtime.request("kiwi", session_id="s", turn_index=n)) for n in range(3)]
    recorder = turns[0].state.recorder
    assert isinstance(recorder, Recorder) and all(t.state.recorder is recorder for t in turns)
    for t in turns:
        for call in range(2):
            runtime.deliver(t, [], call_index=call)
    assert backend.snapshots.registered == [PREFIX.sha256]
    assert [s.key for s in backend.snapshots.list("s")] == [("s", t, c) for t in range(3) for c in range(2)]
    preview = runtime.compose(runtime.request("kiwi", session_id="s", turn_index=9, record=False))
    assert preview.state.recorder is None  # a preview records nothing: no recorder chosen
