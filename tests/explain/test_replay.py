"""``replay``: what a replay reproduces, and what it says when it cannot."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import attrs

from contextplane import ContextSection, ProjectionRequest, Row, Shed, hookimpl
from contextplane.explain import replay
from contextplane.testing.memory import InMemoryBackend
from contextplane_sections.envelopes import WORKING_STATE
from tests.explain.helpers import backend_at, config, host_with, turn

WEB = "project:web"


class StateInOrder:
    """Renders the working state's keys in the order the runtime gave them."""

    plugin_name = "state_in_order"

    @staticmethod
    def draft(request: ProjectionRequest) -> list[Row]:
        return [Row("keys", 1, "keys: " + ", ".join(request.state))]

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        register(ContextSection("state_keys", 12, Shed.NEVER, self.draft, WORKING_STATE))


def test_the_working_state_is_replayed_in_its_own_order(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg, StateInOrder())
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        turn(host, backend, "anything", state={"zeta": 1, "alpha": 2, "goal": "Ship"})
        report = replay(backend, "s1", 1, host=host)
        assert report.identical, [(d.label, d.reasons) for d in report.changed]


def test_a_memory_purged_since_is_named(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        store = backend.memories
        fact = store.add_chunk("Priya approves every deploy", "fact", "operator", namespace=WEB)
        turn(host, backend, "who approves a deploy?")
        store.invalidate_chunk(fact, reason="Priya left")
        store.purge()
        report = replay(backend, "s1", 1, host=host)
        assert not report.identical
        (changed,) = report.changed
        assert changed.label == "retrieved"
        assert changed.reasons == (f"memory {fact} was purged after the turn: its text is gone",)


def test_a_recorded_configuration_that_no_longer_loads_is_said(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        backend.memories.add_chunk("Priya approves every deploy", "fact", "operator", namespace=WEB)
        turn(host, backend, "who approves a deploy?")
        inputs = backend.snapshots.get_inputs("s1", 1)
        assert inputs is not None
        data = json.loads(inputs.config)
        data["context"]["retired_key"] = 3  # as if a later contextplane dropped a key
        backend.snapshots.put_inputs(attrs.evolve(inputs, config=json.dumps(data)))
        report = replay(backend, "s1", 1, host=host)
        assert report.identical  # the host's configuration is the one the turn ran with here
        (note,) = [n for n in report.notes if "recorded configuration" in n]
        assert "unknown key context.retired_key" in note and note.endswith("today's was used instead")


def test_replay_on_the_kit_backend(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg)
    backend = InMemoryBackend()
    store = backend.memories
    old = store.add_chunk("The deploy tool is Jenkins", "fact", "operator", namespace=WEB)
    turn(host, backend, "which deploy tool?")
    store.supersede(old, "The deploy tool is Argo")
    store.add_chunk("Deploy tool docs live in the wiki", "fact", "operator", namespace=WEB)
    assert replay(backend, "s1", 1, host=host).identical
    now = replay(backend, "s1", 1, host=host, now=True)
    (changed,) = now.changed
    assert changed.label == "retrieved"
    assert any(
        f"memory {old}'s lifecycle changed after the turn: superseded by" in r for r in changed.reasons
    )


def _start_of_a_second() -> None:
    """Wait for the next wall-clock second, so what follows shares one second (a turn and a
    summary stored ~ms apart; stamps to the second made them indistinguishable)."""
    import time

    time.sleep(1.02 - time.time() % 1)


def test_a_summary_stored_in_the_turn_s_second_after_it_is_not_replayed(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        backend.summaries.add("s0", "Earlier we agreed the deploy window is Friday.", topic="deploy")
        for index in range(1, 4):
            _start_of_a_second()
            turn(host, backend, "when is the deploy window?", index=index)
            backend.summaries.add(f"later-{index}", f"Summary {index} written after turn {index}.", topic="deploy")
            report = replay(backend, "s1", index, host=host)
            assert report.identical, [(d.label, d.reasons) for d in report.changed]
            assert report.replayed_sha256 == report.recorded_sha256


def test_a_summary_stamped_to_the_second_in_the_turn_s_second_is_named(tmp_path: Path) -> None:
    """Rows stored before sub-second stamps cannot be ordered against a turn in their second:
    the report says so instead of blaming the digest plugin."""
    cfg = config()
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        _start_of_a_second()
        turn(host, backend, "when is the deploy window?")
        inputs = backend.snapshots.get_inputs("s1", 1)
        second = inputs.history_at[:19] + "+00:00"
        late = backend.summaries.add("later", "A summary written after the turn.", at=second)
        report = replay(backend, "s1", 1, host=host)
        assert not report.identical
        (changed,) = report.changed
        assert changed.label == "prior_sessions"
        assert changed.reasons == (
            f"session summary {late} is stamped {second}, to the second, in the turn's own second: "
            "whether the turn could see it is not known (stored before contextplane kept sub-second times)",
        )


def test_memories_not_delivered_and_purged_since_are_named_not_the_plugin(tmp_path: Path) -> None:
    """Rows that took part in the turn's search without being delivered, purged since: the
    search replayed without them ranks differently, and the report says why. (Laid out in rank
    order: chronologically the same two rows would read the same whichever ranks first.)"""
    cfg = config(retrieved_k=2, retrieved_order="rank")
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        store = backend.memories
        store.add_chunk("alpha alpha gamma", "fact", "operator", namespace=WEB)
        store.add_chunk("beta beta gamma", "fact", "operator", namespace=WEB)
        filler = " ".join(f"filler{i}" for i in range(40))
        bystanders = [
            store.add_chunk(f"alpha gamma {j} {filler}", "note", "operator", namespace=WEB) for j in range(6)
        ]
        turn(host, backend, "alpha beta")
        for row in bystanders:
            store.invalidate_chunk(row, reason="noise")
        store.purge()
        report = replay(backend, "s1", 1, host=host)
        assert not report.identical
        (changed,) = report.changed
        assert changed.reasons == (
            f"memories {', '.join(bystanders)} existed at the turn and were purged since (not delivered "
            "then; the text is gone), so the store the turn searched cannot be rebuilt exactly",
        )

class SaysNothing:
    """An unrelated plugin installed after the turn, whose section delivers 0 chars."""

    plugin_name = "says_nothing"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        register(ContextSection("quiet", 90, Shed.NEVER, lambda request: [], WORKING_STATE))


def test_a_plugin_that_delivers_nothing_is_a_note_not_a_difference(tmp_path: Path) -> None:
    cfg = config()
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        backend.memories.add_chunk("Priya approves every deploy", "fact", "operator", namespace=WEB)
        turn(host_with(cfg), backend, "who approves a deploy?")
        later = host_with(cfg, SaysNothing())
        for now in (False, True):
            report = replay(backend, "s1", 1, host=later, now=now)
            assert report.identical, [(d.label, d.reasons) for d in report.changed]
            assert "section 'quiet' (plugin 'says_nothing') is composed now, not then, and delivered nothing" in (
                report.notes
            )
        # The other way round: the turn had the empty section, today's plugins do not.
        turn(later, backend, "who approves a deploy?", index=2)
        report = replay(backend, "s1", 2, host=host_with(cfg))
        assert report.identical, [(d.label, d.reasons) for d in report.changed]
        assert any("then, not now, and delivered nothing" in n for n in report.notes)
