"""The record pipeline (issue 9): both runtime surfaces record one turn identically.

One real ``create_agent`` turn through ``ContextPlaneMiddleware`` and one ``ContextAssembler``
turn, with the same query, session, turn, working state, sections and history (a v1 thread
whose checkpoint still holds a context frame), each with its own ``InMemoryBackend`` (not
SQLite: the records reach any backend through the hooks), and again each with its own
PostgreSQL backend. Each surface must write exactly one
injection-log row, one prompt snapshot and the same trajectory entries, identical apart from
the surface label (``mode``) and the timestamps (``at``, ``created_at``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from contextplane import ContextSection, Envelope, PluginHost, Row, Shed, hookimpl, plugin_host_with
from contextplane.config import structure
from contextplane.observability import TrajectoryWriter
from contextplane.testing.memory import InMemoryBackend
from contextplane_external import ContextAssembler
from contextplane_langgraph import ContextPlaneMiddleware, is_context_frame

from .conftest import MARK, MEMORY, MEMTEXT, InjectionLog, MarkerSections, cfg
from .fakes import RecordingChatModel

SESSION = "pipe"
#: "UTC" makes the first fact the better answer on every store: on "deploy window" alone the
#: two facts tie, and stores break the tie differently (BM25 and ts_rank prefer the shorter).
QUERY = "pipe:when is the deploy window in UTC"
STATE = {"goal": "Ship checkout", "tasks": ["Ask Priya", "Book the window"]}
TOOLS = ("memory_recall",)
LEGACY_TEXT = "<injected_memory>LEGACY-FRAME stale fact</injected_memory>"
FACTS = (
    "The deploy window is Tuesday 14:00 UTC",
    "Deploy window changes need two approvals",
    "Unrelated note about lunch",
)
TASKS = Envelope("task_state")


class PipelineSections:
    """The working state rendered from ``request.state``, and memories retrieved through the
    turn's store (the backend's, read through its consistent view)."""

    plugin_name = "pipeline_sections"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def state(req: Any) -> list[Row]:
            return [Row(f"state-{k}", i, f"{k}: {v}") for i, (k, v) in enumerate(sorted(req.state.items()), 1)]

        def retrieved(req: Any) -> list[Row]:
            hits = req.knowledge_store.search(req.query, 3, namespaces=req.namespaces)
            return [Row(h.chunk.id, h.rank, h.chunk.content) for h in hits]

        register(ContextSection("state", 15, Shed.NEVER, state, TASKS))
        register(ContextSection("retrieved", 50, Shed.DROP_ROWS, retrieved, MEMORY, carries_memory=True))


def make_host(config: Mapping[str, Any] | None = None) -> PluginHost:
    settings = {"context": {"context_window": 200_000, **dict(config or {})}}
    return plugin_host_with([MarkerSections(), PipelineSections(), InjectionLog()], structure(settings))


#: How this run's backends are made: the kit's in-memory backend, or PostgreSQL (one schema
#: per backend, the trajectory as JSONL in ``trajectory_dir`` as on the embedded backend).
_MAKE: dict[str, Callable[[Path], Any]] = {}


@pytest.fixture(autouse=True, params=["memory", "postgres"])
def _backend_kind(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.param == "postgres":
        factory = request.getfixturevalue("pg_backend_factory")
        _MAKE["make"] = lambda d: factory(config=structure({"observability": {"trajectory_dir": str(d)}}))
    else:
        _MAKE["make"] = lambda d: InMemoryBackend(trajectory=TrajectoryWriter(d))
    yield
    _MAKE.clear()


def make_backend(trajectory_dir: Path) -> InMemoryBackend:
    backend: InMemoryBackend = _MAKE["make"](trajectory_dir)
    backend.memories.add_chunks([{"content": f, "source_type": "operator"} for f in FACTS])
    return backend


def native_turn(host: PluginHost, backend: InMemoryBackend, *, incognito: bool = False) -> tuple[Any, Any]:
    """One turn of a real agent on a v1 thread: (what the model saw, the middleware)."""
    model = RecordingChatModel(policy=lambda _m: AIMessage("ok"))
    mw = ContextPlaneMiddleware(
        host=host,
        backend=backend,
        stable_prefix=True,
        tools=TOOLS,
        incognito=incognito,
        working_state=lambda _state, _runtime: STATE,
    )
    agent = create_agent(model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    legacy = HumanMessage(LEGACY_TEXT, additional_kwargs={"context_frame": True}, id="legacy-frame-1")
    agent.update_state(
        cfg(SESSION),
        {"messages": [HumanMessage("pipe:earlier", id="h0"), legacy, AIMessage("earlier answer", id="a0")]},
    )
    agent.invoke({"messages": [HumanMessage(QUERY, id="h1")]}, cfg(SESSION))
    [seen] = model.calls
    return seen, mw


#: The same thread as the external runtime stores it: plain messages, the v1 frame marked.
HISTORY = (
    {"role": "user", "content": "pipe:earlier", "id": "h0"},
    {"role": "user", "content": LEGACY_TEXT, "id": "legacy-frame-1", "metadata": {"context_frame": True}},
    {"role": "assistant", "content": "earlier answer", "id": "a0"},
    {"role": "user", "content": QUERY, "id": "h1"},
)


def external_turn(host: PluginHost, backend: InMemoryBackend, *, incognito: bool = False) -> Any:
    assembler = ContextAssembler(host=host, backend=backend, tools=TOOLS)
    return assembler.assemble(
        QUERY,
        session_id=SESSION,
        turn_index=1,
        state=STATE,
        incognito=incognito,
        history=HISTORY,
        call_index=0,
    )


# --- normalising: the surface label and the timestamps, nothing else -----------------------


def injection_rows(backend: InMemoryBackend) -> list[Any]:
    return [attrs.evolve(r, at="<at>", mode="<mode>") for r in backend.injections.rows()]


def snapshots(backend: InMemoryBackend) -> list[Any]:
    return [attrs.evolve(s, created_at=0.0, mode="<mode>") for s in backend.snapshots.list()]


def trajectory(backend: InMemoryBackend) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for e in backend.trajectory.read(SESSION).entries:
        data = dict(e.data)
        assert isinstance(data.pop("at"), str)
        if "mode" in data:
            data["mode"] = "<mode>"
        out.append((e.ref, e.kind, data))
    return out


def labels(backend: InMemoryBackend) -> tuple[list[str], list[str], list[str]]:
    """The surface labels the normalisation above hides, so they are asserted too."""
    return (
        [r.mode for r in backend.injections.rows()],
        [s.mode for s in backend.snapshots.list()],
        [e.data["mode"] for e in backend.trajectory.read(SESSION).entries if "mode" in e.data],
    )


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_native_and_external_turns_record_the_same_rows(tmp_path: Path) -> None:
    host = make_host()
    native, external = make_backend(tmp_path / "native"), make_backend(tmp_path / "external")
    seen, mw = native_turn(host, native)
    assembly = external_turn(host, external)
    projected = assembly.projected_context

    # The same delivery on both surfaces: the history without the v1 frame, the projection last.
    assert seen[0].type == "system" and seen[0].content == assembly.stable_prefix.text
    assert [(m.type, m.content) for m in seen[1:]] == [
        ({"user": "human", "assistant": "ai"}[m["role"]], m["content"]) for m in assembly.messages
    ]
    assert is_context_frame(seen[-1]) and seen[-1].content == projected.text
    assert mw.stable_prefix.sha256 == assembly.stable_prefix.sha256

    # Exactly one of each record per surface.
    assert len(native.injections.rows()) == len(external.injections.rows()) == 1
    assert native.snapshots.count() == external.snapshots.count() == 1
    assert labels(native) == (["native"], ["native"], ["native"])
    assert labels(external) == (["external"], ["external"], ["external"])

    # Identical apart from the label and the timestamps.
    assert injection_rows(native) == injection_rows(external)
    assert snapshots(native) == snapshots(external)
    assert trajectory(native) == trajectory(external)
    prefix = assembly.stable_prefix
    assert native.snapshots.prefix_text(prefix.sha256) == external.snapshots.prefix_text(prefix.sha256)

    # ... and what they agree on is the turn: not two empty records.
    delivered = {
        "state": ["state-goal", "state-tasks"],
        "working": ["ws-1", "ws-2"],
        "memory": ["mem-1"],
        "digest": ["digest-1"],
        "retrieved": ["1", "2"],
    }
    [row] = native.injections.rows()
    assert (row.session_id, row.turn_index, row.delivered) == (SESSION, 1, delivered)
    assert (row.used_chars, row.budget_chars) == (projected.used_chars, projected.budget_chars)
    [snap] = native.snapshots.list()
    assert snap.key == (SESSION, 1, 0) and not snap.incognito
    assert snap.projection_sha256 == sha(projected.text) == sha(seen[-1].content)
    assert [(s.label, s.sha256) for s in snap.sections] == [
        (s.name, s.sha256) for s in projected.sections if s.chars
    ]
    assert {k: list(v) for k, v in snap.delivered_ids.items()} == delivered
    assert snap.prefix_sha256 == prefix.sha256
    assert [p.name for p in snap.prefix_sections] == list(prefix.order)
    assert native.snapshots.prefix_text(prefix.sha256) == prefix.text
    assert (snap.history_messages, snap.history_chars) == (3, len("pipe:earlier" "earlier answer" + QUERY))
    assert [(f.message_id, f.chars, f.sha256) for f in snap.stripped] == [
        ("legacy-frame-1", len(LEGACY_TEXT), sha(LEGACY_TEXT))
    ]
    assert snap.full_text is None
    entries = {e.ref: e for e in native.trajectory.read(SESSION).entries}
    assert [entries[r].kind for r in snap.trajectory_refs] == ["stable_prefix", "projection"]
    turn = entries[snap.trajectory_refs[1]].data
    assert (turn["turn_index"], turn["reason"], turn["query"]) == (1, "turn", QUERY)
    assert (turn["sha256"], turn["text"]) == (snap.projection_sha256, projected.text)
    assert entries[snap.trajectory_refs[0]].data["sha256"] == prefix.sha256


def test_an_incognito_turn_records_no_row_and_a_snapshot_without_text_or_hashes(tmp_path: Path) -> None:
    # Full-text capture on: incognito must win over it.
    host = make_host({"capture_full_text": True})
    native, external = make_backend(tmp_path / "native"), make_backend(tmp_path / "external")
    seen, _mw = native_turn(host, native, incognito=True)
    assembly = external_turn(host, external, incognito=True)
    assert seen[-1].content == assembly.projected_context.text
    assert MEMTEXT not in seen[-1].content and "Tuesday" not in seen[-1].content

    for backend in (native, external):
        assert backend.injections.rows() == []
        [snap] = backend.snapshots.list()
        assert snap.key == (SESSION, 1, 0)
        assert (snap.mode, snap.incognito) == ("incognito", True)
        assert snap.projection_sha256 is None and snap.full_text is None
        assert [(s.label, s.sha256) for s in snap.sections] == [("working", None), ("state", None)]
        assert [(f.message_id, f.chars, f.sha256) for f in snap.stripped] == [
            ("legacy-frame-1", len(LEGACY_TEXT), None)
        ]
        # The prefix by reference only: its text is not stored for an incognito call.
        assert snap.prefix_sha256 == assembly.stable_prefix.sha256
        assert backend.snapshots.prefix_text(assembly.stable_prefix.sha256) is None
        [entry] = backend.trajectory.read(SESSION).entries
        assert entry.kind == "projection" and entry.data["incognito"] is True
        assert not {"query", "sha256", "text"} & set(entry.data)
        assert list(snap.trajectory_refs) == [entry.ref]
        written = backend.trajectory.path_for(SESSION).read_text()
        for secret in (QUERY, "pipe:earlier", MARK, MEMTEXT, "Ship checkout", "Tuesday", "LEGACY-FRAME"):
            assert secret not in written

    # The two surfaces agree here too (the label is "incognito" on both).
    assert snapshots(native) == snapshots(external)
    assert labels(native) == labels(external) == ([], ["incognito"], ["incognito"])
    assert trajectory(native) == trajectory(external)


def test_full_text_capture_reads_the_same_on_both_surfaces(tmp_path: Path) -> None:
    """Roles are the chat roles on both surfaces (LangChain's human/ai become user/assistant),
    so the operator's full-text capture of one turn is byte-identical whichever delivered it."""
    host = make_host({"capture_full_text": True})
    native, external = make_backend(tmp_path / "native"), make_backend(tmp_path / "external")
    native_turn(host, native)
    external_turn(host, external)
    [n], [e] = native.snapshots.list(), external.snapshots.list()
    assert n.full_text is not None and n.full_text == e.full_text
    assert "[user]\npipe:earlier" in n.full_text and "[assistant]\nearlier answer" in n.full_text
    assert "LEGACY-FRAME" not in n.full_text  # the stripped frame never reached the model
    assert snapshots(native) == snapshots(external)
