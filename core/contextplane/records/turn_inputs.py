"""Turn inputs: what a composed turn was composed *from*, so it can be explained and replayed.

A prompt snapshot says what a model call saw (by reference); it cannot say why, or whether the
same inputs would give the same projection again. ``TurnInputs`` is the other half, written
once per recorded composition (never for an incognito turn): the query, the working state,
the mode flags, the budget and window, the configuration in force (as data, with its hash),
the plugins and their versions, the store's history position (what the composition read,
see ``contextplane.memory.history``), and the sections' manifest with their content hashes
(what it produced). ``contextplane.explain`` reads it back.

It is a record of its own, beside the snapshot row rather than inside it, so the per-call
snapshot stays one small insert (bench/runtime_bench.py): inputs are written per turn.
Keyed by (session, turn): a turn composed again (a resumed run) keeps its latest composition.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs


@attrs.frozen
class TurnInputs:
    """One recorded composition's inputs and output manifest; JSON fields are compact text."""

    session_id: str
    turn_index: int
    created_at: float
    query: str
    #: The working state as JSON; ``state_exact`` is False when some value was not JSON data
    #: (it was recorded as its ``repr``, so a replay cannot rebuild it).
    state: str
    state_exact: bool
    surface: str
    goal_turn: bool
    project: str | None
    only_sections: str | None
    budget_tokens: int | None
    context_window: int | None
    skills_index: str | None
    extra: str
    #: The configuration in force (``Config`` as data) and the sha256 of that JSON.
    config: str
    config_sha256: str
    config_base_dir: str
    #: ``{plugin name: version or null}`` of the host that composed the turn.
    plugins: str
    #: The store's history position the composition read at (None: no memory was read).
    history_seq: int | None
    history_at: str | None
    #: What it produced: sha256 of the whole text, and per section label, plugin, chars,
    #: sha256, delivered ids, offered count, truncated, suppressed and error.
    projection_sha256: str | None
    sections: str
    budget_chars: int | None
    used_chars: int
    #: The trajectory entry holding the projection's text, when a trajectory is kept.
    trajectory_ref: str | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.session_id, self.turn_index)

    def section_manifest(self) -> list[dict[str, Any]]:
        return list(json.loads(self.sections))

    def plugin_versions(self) -> dict[str, str | None]:
        return dict(json.loads(self.plugins))

    def config_data(self) -> dict[str, Any]:
        return dict(json.loads(self.config))

    def state_data(self) -> Mapping[str, Any]:
        return dict(json.loads(self.state))


#: The columns of the storage form, in ``TurnInputs`` field order.
TURN_INPUT_FIELDS: tuple[str, ...] = tuple(f.name for f in attrs.fields(TurnInputs))


@runtime_checkable
class TurnInputStore(Protocol):
    """Where turn inputs are kept. Optional: a snapshot store that also implements it gets
    them recorded (the embedded and in-memory ones do); without it, past turns cannot be
    explained or replayed, and the records observer says so once."""

    def put_inputs(self, inputs: TurnInputs) -> None:
        """Store (or replace, same session and turn) one turn's inputs."""
        ...

    def get_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None: ...

    def list_inputs(self, session_id: str | None = None) -> builtins.list[TurnInputs]:
        """Every recorded turn's inputs (one session's, when given), in (session, turn) order."""
        ...


@runtime_checkable
class AsyncTurnInputStore(TurnInputStore, Protocol):
    """A ``TurnInputStore`` that also answers an event loop (see ``records.AsyncSessionSummaries``)."""

    async def aput_inputs(self, inputs: TurnInputs) -> None: ...

    async def aget_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None: ...
