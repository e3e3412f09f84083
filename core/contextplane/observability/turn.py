"""What the record pipeline carries from a turn's composition to each of its model calls.

A turn is composed once and delivered to one or more model calls; the prompt snapshot of each
call shares what was built when the turn was composed (the ``TurnRecord``: the projection's
hash, its section references, its trajectory entry). Before issue 25 that record was parked in
a process-wide dict under ``id(projection)`` and fished back out at model-call time, and the
recorder was found in another registry by backend. Now it travels with the turn: a
``TurnState`` hangs on the projection it belongs to (a private slot of ``ProjectedContext``),
put there by the runtime before observers are told (with the runtime's backend and recorders)
or by the records observer on first use (a projection composed outside a runtime).
"""

from __future__ import annotations

import logging
import threading

import attrs

from contextplane.config import Config
from contextplane.notices import log_once
from contextplane.recorder import Policy as Policy
from contextplane.recorder import Recorder, TurnRecord
from contextplane.records.backend import Backend
from contextplane.records.turn_inputs import TurnInputStore
from contextplane.types import ProjectedContext

#: The records observer's logger (the warning below predates the move).
log = logging.getLogger("contextplane.records")
_lock = threading.Lock()


@attrs.define(eq=False)
class TurnState:
    """One composition's record state, shared by its model calls.

    ``backend`` is where the turn's records go (None: nowhere). ``recorder`` is the (sans-IO)
    recorder its rows are built with, chosen once by the runtime that composed the turn (for
    its backend and the request's recording policy); ``recorders`` is that runtime's recorders
    by policy (where a turn with no ``recorder`` finds one). Both None for a turn composed outside a
    runtime (the records observer then uses its process-wide ones). ``config`` is the runtime's
    configuration with its JSON and hash (dumped once per runtime, for the turn inputs).
    ``record`` is the turn's ``TurnRecord``, kept once the recorder has built it.
    ``keeps_inputs``: whether the backend keeps turn inputs (asked once per runtime)."""

    backend: Backend | None
    recorders: dict[Policy, Recorder] | None = None
    config: tuple[Config, str, str] | None = None
    record: TurnRecord | None = None
    recorder: Recorder | None = None
    #: Whether ``backend``'s snapshot store keeps turn inputs: a fact of the backend, so a
    #: runtime asks it once and hands it to every turn; None until asked.
    keeps_inputs: bool | None = None

    def keep(self, record: TurnRecord) -> None:
        """Remember the turn's record (the recorder hands it over once it is built)."""
        self.record = record

    def config_json(self, config: Config) -> tuple[str, str] | None:
        """The JSON and hash of ``config`` when it is the runtime's (dumped already), else None."""
        known = self.config
        return (known[1], known[2]) if known is not None and known[0] is config else None


    def keeps_turn_inputs(self) -> bool:
        """Whether the turn's backend keeps turn inputs (``keeps_inputs``, asked now if no
        runtime asked it)."""
        if self.keeps_inputs is None:
            self.keeps_inputs = self.backend is not None and keeps_inputs(self.backend)
        return self.keeps_inputs


def keeps_inputs(backend: Backend) -> bool:
    """True when the backend's snapshot store keeps turn inputs (said once when it does not)."""
    store = backend.snapshots
    if isinstance(store, TurnInputStore):
        return True
    log_once(
        log,
        ("no-turn-inputs", type(store)),
        logging.WARNING,
        "snapshot store %s keeps no turn inputs (contextplane.records.TurnInputStore), so past turns "
        "of this backend cannot be explained or replayed",
        type(store).__name__,
    )
    return False


def state_of(projection: ProjectedContext) -> TurnState | None:
    """The state attached to ``projection``, or None (a projection no runtime composed and no
    observer recorded yet, or a copy made by ``attrs.evolve``)."""
    try:
        found = object.__getattribute__(projection, "_turn")
    except AttributeError:
        return None
    return found if isinstance(found, TurnState) else None


def attach(projection: ProjectedContext, state: TurnState) -> TurnState:
    """Hang ``state`` on ``projection`` (the slot is private: only the runtime and the records
    observer write it)."""
    object.__setattr__(projection, "_turn", state)
    return state


def ensure(projection: ProjectedContext, backend: Backend | None) -> TurnState:
    """The projection's state, attached with ``backend`` when it has none yet (two model calls
    delivered at once get the same one)."""
    found = state_of(projection)
    if found is not None:
        return found
    with _lock:
        found = state_of(projection)
        return found if found is not None else attach(projection, TurnState(backend))
