"""A recorded turn, read back: its inputs, the request they rebuild, and the past it read.

``explain`` and ``replay`` both start here. A turn recorded with ``TurnInputs`` is rebuilt as
the ``ProjectionRequest`` it was composed from (query, working state, flags, budget and
window, the configuration in force), to be composed again against the store *as of* the
history position the turn read at (``MemoryHistory.as_of``), with the session summaries the
digest could see then. Nothing is recorded while doing so (``record=False``).
"""

from __future__ import annotations

import builtins
import contextlib
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import attrs

from contextplane.config import Config, structure
from contextplane.config.schema import BEHAVIOUR_BEFORE
from contextplane.errors import ConfigError, ContextPlaneError, StoreError
from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import read_timestamp
from contextplane.records.summaries import SessionSummary
from contextplane.records.turn_inputs import TurnInputs, TurnInputStore
from contextplane.request import ProjectionRequest, Surface
from contextplane.store.protocol import MemoryHistory


class TurnNotRecorded(ContextPlaneError):
    """The turn asked about has no recorded inputs (the message says why, and what to do)."""


def inputs_store(backend: Any) -> TurnInputStore:
    store = backend.snapshots
    if not isinstance(store, TurnInputStore):
        raise TurnNotRecorded(
            f"backend {backend.name} keeps no turn inputs ({type(store).__name__} is not a "
            "contextplane.records.TurnInputStore), so its past turns cannot be explained or replayed"
        )
    return store


def load_inputs(backend: Any, session_id: str, turn_index: int) -> TurnInputs:
    """The recorded inputs of one turn, or ``TurnNotRecorded`` saying why there are none."""
    found = inputs_store(backend).get_inputs(session_id, turn_index)
    if found is not None:
        return found
    snapshot = backend.snapshots.get(session_id, turn_index)
    if snapshot is not None and snapshot.incognito:
        raise TurnNotRecorded(
            f"session {session_id!r} turn {turn_index} was incognito: nothing of its inputs was recorded, "
            "and no memory section was composed for it"
        )
    known = sorted(i.turn_index for i in inputs_store(backend).list_inputs(session_id))
    hint = f"; recorded turns of this session: {', '.join(map(str, known))}" if known else ""
    raise TurnNotRecorded(
        f"session {session_id!r} turn {turn_index} has no recorded inputs (incognito, which records nothing; "
        "not composed with record=True; recorded before contextplane kept turn inputs; pruned by retention; "
        f"or observability.turn_inputs was off){hint}"
    )


def position_of(inputs: TurnInputs) -> HistoryPosition | None:
    if inputs.history_seq is None or inputs.history_at is None:
        return None
    at = read_timestamp(inputs.history_at)
    return None if at is None else HistoryPosition(int(inputs.history_seq), at)


def recorded_config(inputs: TurnInputs) -> Config:
    """The configuration the turn was composed under, rebuilt from its record (``ConfigError``
    when this contextplane no longer accepts it, e.g. a key was removed since). A key added
    since that changes delivery takes the value that behaves as before it
    (``config.schema.BEHAVIOUR_BEFORE``), not today's default."""
    data = {
        table: dict(keys) if isinstance(keys, dict) else keys for table, keys in inputs.config_data().items()
    }
    for (table, key), then in BEHAVIOUR_BEFORE.items():
        keys = data.setdefault(table, {})
        if isinstance(keys, dict) and key not in keys:  # recorded before the key existed
            keys[key] = then
    return structure(
        data,
        origin=f"the recorded configuration of turn {inputs.turn_index} of session {inputs.session_id!r}",
        base_dir=inputs.config_base_dir,
    )


def config_for(inputs: TurnInputs, fallback: Config, notes: list[str]) -> Config:
    """The recorded configuration, else ``fallback`` with a note saying why."""
    try:
        return recorded_config(inputs)
    except ConfigError as exc:
        notes.append(f"the recorded configuration no longer loads ({exc}); today's was used instead")
        return fallback


def _skills(inputs: TurnInputs) -> tuple[Any, ...] | None:
    if inputs.skills_index is None:
        return None
    return tuple(json.loads(inputs.skills_index))


def request_for(inputs: TurnInputs, config: Config, *, store: Any, backend: Any) -> ProjectionRequest:
    """The turn's request, rebuilt from its inputs, reading ``store`` (an as-of view or the
    live store) and ``backend``; never recorded."""
    only = None if inputs.only_sections is None else frozenset(json.loads(inputs.only_sections))
    return ProjectionRequest(
        query=inputs.query,
        config=config,
        knowledge_store=store,
        skills_index=_skills(inputs),
        state=inputs.state_data(),
        session_id=inputs.session_id,
        turn_index=inputs.turn_index,
        project=inputs.project,
        surface=Surface(inputs.surface),
        incognito=False,
        goal_turn=inputs.goal_turn,
        only_sections=only,
        budget_tokens=inputs.budget_tokens,
        context_window=inputs.context_window,
        record=False,
        backend=backend,
        extra=json.loads(inputs.extra),
    )


class SummariesAsOf:
    """The session summaries as of a time: those stored at or before it (summaries are
    append-only, so that is all the digest could have seen)."""

    def __init__(self, summaries: Any, at: datetime) -> None:
        self._summaries = summaries
        self._at = at
        #: Summaries admitted though their order against the turn is not known: stamped to the
        #: second (before summaries kept sub-second times) in the turn's own second.
        self.unordered: dict[str, str] = {}

    def _then(self, rows: list[SessionSummary]) -> list[SessionSummary]:
        out = []
        for row in rows:
            stamp = read_timestamp(row.created_at)
            if stamp is None or stamp <= self._at:
                out.append(row)
                if stamp == self._at.replace(microsecond=0) and _to_the_second(row.created_at):
                    self.unordered[row.id] = row.created_at
        return out

    def _fetch(self, fetch: Any, limit: int) -> list[SessionSummary]:
        n = max(limit * 2, limit + 8)
        while True:
            rows = fetch(n)
            kept = self._then(rows)
            if len(kept) >= limit or len(rows) < n:
                return kept[:limit]
            n *= 4

    def newest(self, limit: int, *, exclude_session: str | None = None) -> builtins.list[SessionSummary]:
        return self._fetch(lambda n: self._summaries.newest(n, exclude_session=exclude_session), limit)

    def relevant(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> builtins.list[SessionSummary]:
        return self._fetch(
            lambda n: self._summaries.relevant(query, n, exclude_session=exclude_session), limit
        )

    def add(self, *args: Any, **kwargs: Any) -> str:
        raise StoreError("a replayed turn writes nothing")

    def count(self) -> int:
        return len(self.newest(10**9))


def _to_the_second(stamp: str) -> bool:
    """Whether a stored time has no fraction of a second (``...T12:00:05+00:00``)."""
    return "." not in stamp


@attrs.frozen
class PastBackend:
    """The turn's backend as the past saw it: memories as of the turn, summaries as of it.
    Records go nowhere (a replay records nothing)."""

    origin: Any
    memories: Any
    summaries: Any

    @property
    def name(self) -> str:
        return f"{self.origin.name} (as of a recorded turn)"

    @property
    def injections(self) -> Any:
        return self.origin.injections

    @property
    def snapshots(self) -> Any:
        return self.origin.snapshots

    @property
    def trajectory(self) -> Any:
        return None

    def close(self) -> None:
        pass


def events_of(store: Any, memory_id: str) -> list[HistoryEvent]:
    """The memory's lifecycle events, or none when the store keeps no history."""
    if isinstance(store, MemoryHistory):
        return store.history(memory_id)
    return []


def history_of(store: Any) -> MemoryHistory:
    if not isinstance(store, MemoryHistory):
        raise StoreError(
            f"memory store {type(store).__name__} keeps no lifecycle history "
            "(contextplane.store.MemoryHistory), "
            "so a past turn cannot be read as it was"
        )
    return store


@contextlib.contextmanager
def past_view(backend: Any, inputs: TurnInputs, *, exact_ranking: bool = True) -> Iterator[tuple[Any, Any]]:
    """(store view, backend) as the turn saw them: the store as of its recorded position and
    the summaries stored by then. A turn that read no memory gets the live store."""
    position = position_of(inputs)
    if position is None:
        yield backend.memories, backend
        return
    store = history_of(backend.memories)
    opener = store.as_of
    try:
        manager = opener(position, exact_ranking=exact_ranking)  # type: ignore[call-arg]
    except TypeError:  # a store whose as_of has no ranking option
        manager = opener(position)
    with manager as view:
        yield view, PastBackend(backend, view, SummariesAsOf(backend.summaries, position.at))
