"""The scenario: a real multi-turn session on both runtime surfaces (the LangGraph middleware on a
``create_agent`` graph with a fake model, then the external assembler), with memories written,
confirmed, rejected, superseded and expiring between turns. Every recorded turn replays byte for
byte; after a plugin's output changes, replay names the section and why; ``--now`` shows what
the lifecycle changes since would alter; explain's verdict for a past turn is the one of then.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from contextplane import ContextSection, PluginHost, ProjectionRequest, Row, Shed, hookimpl
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.explain import explain, replay
from contextplane_external import ContextAssembler
from contextplane_sections.envelopes import WORKING_STATE
from tests.explain.helpers import config, host_with

from .conftest import cfg, make_agent

WEB = "project:web"


class Motd:
    """A plugin whose output the test changes after the turns were recorded."""

    plugin_name = "motd"

    def __init__(self) -> None:
        self.text = "Release train leaves at 15:00"

    def draft(self, request: ProjectionRequest) -> list[Row]:
        return [Row("motd", 1, f"Notice: {self.text}")]

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        register(ContextSection("motd", 15, Shed.NEVER, self.draft, WORKING_STATE))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[PluginHost, SQLiteBackend, Motd]]:
    motd = Motd()
    # The scenario's turns ask compound questions that must deliver rows of four different
    # topics at once; under the relevance floor each of them answers under 0.3 of such a question
    # (relevance is the share of the question a row answers), so the floor is off here. The floor's
    # own replay is test_a_turn_decided_by_the_relevance_floor_replays_after_the_corpus_moves.
    conf = config(retrieved_k=6, min_relevance=0.0)
    host = host_with(conf)
    host.register(motd, "motd", version="1.0")
    backend = SQLiteBackend(tmp_path / "scenario.sqlite3", config=conf)
    yield host, backend, motd
    backend.close()


def _delivered(backend: SQLiteBackend, session: str, turn: int) -> set[str]:
    inputs = backend.snapshots.get_inputs(session, turn)
    assert inputs is not None
    return {
        i for s in inputs.section_manifest() for i in s["ids"] if s["label"] in ("always_on", "retrieved")
    }


def test_every_turn_of_a_changing_session_replays_byte_for_byte(
    world: tuple[PluginHost, SQLiteBackend, Motd],
) -> None:
    host, backend, motd = world
    store = backend.memories
    add = store.add_chunk
    window = add(
        "Deploy window is Tuesday 14:00 UTC",
        "hot",
        "operator",
        memory_kind="standing",
        namespace=WEB,
        subject="window",
    )
    canary = add("The canary runs 30 minutes before a deploy rollout", "note", "extracted", namespace=WEB)
    friday = add("A deploy on Friday evening is fine", "fact", "extracted", namespace=WEB)
    freeze = add("Deploy freeze: no deploy until the audit ends", "fact", "operator", namespace=WEB)
    dashboard = add(
        "The deploy canary dashboard is at /canary",
        "fact",
        "operator",
        namespace=WEB,
        expires_at=datetime.now(UTC) + timedelta(seconds=0.8),
    )

    # The native surface: two turns of one thread through the middleware.
    agent, model, _saver, _mw = make_agent(
        host, tools=[], policy=lambda _m: AIMessage("noted"), knowledge_store=store, backend=backend
    )
    agent.invoke(
        {"messages": [HumanMessage("When is the deploy window, and how long does the canary run?")]},
        cfg("scn"),
    )
    store.set_review_state(canary, "confirmed", by="priya")
    store.set_review_state(friday, "rejected", by="priya")
    moved = add(
        "Deploy window is Thursday 10:00 UTC",
        "hot",
        "operator",
        memory_kind="standing",
        namespace=WEB,
        subject="window",
    )
    assert moved.outcome == "superseded" and moved.superseded == (window,)
    rollback = add("A deploy rollback needs a ticket", "fact", "operator", namespace=WEB)
    agent.invoke(
        {"messages": [HumanMessage("Can I deploy on Friday, and what does a rollback need?")]}, cfg("scn")
    )
    assert len(model.calls) == 2

    # The external surface: the same backend, another session, after more changes.
    store.set_expires_at(freeze, datetime.now(UTC) - timedelta(seconds=1), by="priya")
    time.sleep(max(0.0, (store.get(dashboard).expires_at - datetime.now(UTC)).total_seconds()) + 0.05)  # type: ignore[union-attr]
    assembler = ContextAssembler(host=host, knowledge_store=store, backend=backend)
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Is there a deploy freeze, and where is the canary dashboard?"}
    ]
    assembler.assemble(history[0]["content"], session_id="ext", turn_index=1, history=history)
    add("The canary dashboard moved to /deploys/canary", "fact", "operator", namespace=WEB)
    store.set_review_state(canary, "rejected", by="sam")
    history.append({"role": "assistant", "content": "ok"})
    history.append({"role": "user", "content": "Remind me: how long is the canary, and the deploy window?"})
    assembler.assemble(history[-1]["content"], session_id="ext", turn_index=2, history=history)

    recorded = backend.snapshots.list_inputs()
    assert [(i.session_id, i.turn_index, i.surface) for i in recorded] == [
        ("ext", 1, "external"),
        ("ext", 2, "external"),
        ("scn", 0, "native"),
        ("scn", 1, "native"),
    ]
    # Each turn delivered what its moment allowed (so the store really changed under them).
    assert {window, canary, friday} <= _delivered(backend, "scn", 0) and moved not in _delivered(
        backend, "scn", 0
    )
    assert friday not in _delivered(backend, "scn", 1) and {moved, rollback} <= _delivered(backend, "scn", 1)
    assert freeze in _delivered(backend, "scn", 0) and freeze not in _delivered(backend, "ext", 1)
    assert dashboard in _delivered(backend, "scn", 0) and dashboard not in _delivered(backend, "ext", 1)
    assert canary in _delivered(backend, "ext", 1) and canary not in _delivered(backend, "ext", 2)
    # Snapshots were taken on both surfaces, one per model call.
    assert backend.snapshots.count("scn") == 2 and backend.snapshots.count("ext") == 2

    # Every turn replays byte for byte against the store as it was then.
    for inputs in recorded:
        report = replay(backend, inputs.session_id, inputs.turn_index, host=host)
        assert report.identical, (inputs.key, [(d.label, d.reasons) for d in report.changed])
        assert (
            report.replayed_sha256
            == inputs.projection_sha256
            == backend.snapshots.get(inputs.session_id, inputs.turn_index).projection_sha256
        )
        assert {d.status for d in report.sections} == {"same"}

    # Explain speaks of then for a past turn, of now for a query.
    then = explain(friday, backend=backend, host=host, session_id="scn", turn_index=0)
    now = explain(friday, backend=backend, host=host, query="Can I deploy on Friday?", session_id="scn")
    assert then.verdict == "delivered" and (now.verdict, now.reason) == ("filtered", "rejected")
    assert explain(window, backend=backend, host=host, session_id="scn", turn_index=1).reason == "superseded"

    # A plugin's output changes: replay names the section and says why.
    motd.text = "Release train leaves at 16:30"
    report = replay(backend, "scn", 0, host=host)
    assert not report.identical
    assert [(d.label, d.status) for d in report.changed] == [("motd", "changed")]
    (reason,) = report.changed[0].reasons
    assert reason.startswith("plugin 'motd' produced different output from the same recorded inputs")
    assert "-- Notice: Release train leaves at 15:00" in report.text_diff
    assert "+- Notice: Release train leaves at 16:30" in report.text_diff
    host.unregister("motd")
    host.register(motd, "motd", version="1.1")
    report = replay(backend, "ext", 2, host=host)
    assert report.changed[0].reasons == ("plugin 'motd' changed version: 1.0 then, 1.1 now",)
    motd.text = "Release train leaves at 15:00"

    # --now: today's store and configuration; the differences are the lifecycle changes since.
    report = replay(backend, "scn", 0, host=host, now=True)
    changed = {d.label: d for d in report.changed}
    assert set(changed) == {"always_on", "retrieved"}  # motd's output is the same again
    assert "plugin 'motd' changed version: 1.0 then, 1.1 now" in report.notes
    always = " ".join(changed["always_on"].reasons)
    assert f"memory {window}'s lifecycle changed after the turn: superseded by {moved}" in always
    assert f"memory {moved} was written after the turn" in always
    retrieved = " ".join(changed["retrieved"].reasons)
    assert (
        f"memory {friday}'s lifecycle changed after the turn: review state set to rejected (by priya)"
        in retrieved
    )
    assert f"memory {freeze}'s lifecycle changed after the turn: expiry set to" in retrieved


def test_a_turn_decided_by_the_relevance_floor_replays_after_the_corpus_moves(tmp_path: Path) -> None:
    """Relevance is relative to the corpus (IDF), so rows written after a turn change every
    row's relevance now; the replay must score against the corpus of then and match."""
    conf = config()
    host = host_with(conf)
    with contextlib.closing(SQLiteBackend(tmp_path / "floor.sqlite3", config=conf)) as backend:
        add = backend.memories.add_chunk
        approver = add("Priya approves production deploys", "fact", "operator", namespace=WEB)
        canary = add("The canary checks every production deploy", "fact", "operator", namespace=WEB)
        noise = [add(f"Filler note number {i} about lunch", "fact", "operator", namespace=WEB) for i in range(30)]
        question = "who approves production deploys?"
        assembler = ContextAssembler(host=host, knowledge_store=backend.memories, backend=backend)
        then = assembler.assemble(question, session_id="floor", turn_index=1)
        retrieved = then.projected_context.section("retrieved")
        assert retrieved is not None and set(retrieved.item_ids) == {approver, canary}
        scopes = ["", WEB, "session:floor"]

        def relevance(memory_id: str) -> float:
            hits = backend.memories.search(question, 50, deliverable=True, namespaces=scopes)
            return next(h.relevance or 0.0 for h in hits if h.chunk.id == memory_id)

        before = relevance(canary)
        for i in range(12):  # fewer rows than a tenth of the store would be, each with two query terms
            add(f"Production deploy log entry {i}", "fact", "operator", namespace=WEB)
        assert relevance(canary) < before  # the corpus moved: "production" and "deploy" say less now
        report = replay(backend, "floor", 1, host=host)
        assert report.identical, [(d.label, d.reasons) for d in report.changed]
        now = replay(backend, "floor", 1, host=host, now=True)
        assert [d.label for d in now.changed] == ["retrieved"]
        past = explain(canary, backend=backend, host=host, session_id="floor", turn_index=1)
        assert past.verdict == "delivered"
        assert explain(noise[0], backend=backend, host=host, session_id="floor", turn_index=1).verdict == (
            "never_retrieved"
        )
