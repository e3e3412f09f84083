"""The record pipeline: one built-in plugin that records every turn through the hooks.

It is registered on every ``PluginHost`` (name ``contextplane.records``) and is the only
thing that writes a turn's records, so no adapter carries recorder choreography:

- ``observe_projection`` (recorded, never incognito): one injection-log row, and the turn's
  manifest plus its trajectory entry, built once per composition, and its inputs
  (``records.turn_inputs``: what ``explain`` and ``replay`` read back);
- ``observe_model_call`` (every delivered call, incognito flagged): one prompt snapshot, the
  stable prefix stored once per hash and one trajectory entry per session and prefix.

Everything goes to the request's backend; a turn with no backend records nothing, and says
so once in the log. ``plugins.disabled = ["contextplane.records"]`` turns recording off.

A record write that fails (a full disk, a database that went away) never fails the turn: the
observer marks the projection's ``record_status`` "failed: ..." and re-raises, so the plugin
host isolates it like any observer failure (logged once with its traceback, kept in
``host.failures``, raised in strict mode). Before issue 26 the turn said nothing of it, so a
caller could not tell a turn that can be explained from one that cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Iterator
from typing import Any, cast

from contextplane.errors import StoreError
from contextplane.hookspecs import hookimpl
from contextplane.notices import log_once
from contextplane.observability.redaction import Redactor
from contextplane.observability.snapshots import PromptRecorder, TurnRecord
from contextplane.observability.turn import Policy, TurnState, ensure, state_of
from contextplane.observability.turn_inputs import turn_inputs
from contextplane.records import aio as records_aio
from contextplane.records.backend import Backend
from contextplane.records.injections import InjectionRow
from contextplane.records.turn_inputs import TurnInputs, TurnInputStore
from contextplane.request import ProjectionRequest
from contextplane.types import ModelCall, ProjectedContext

PLUGIN_NAME = "contextplane.records"
log = logging.getLogger("contextplane.records")

_lock = threading.Lock()
#: One recorder per backend (it caches prefix hashes and per-session trajectory refs); weak, so
#: a closed and dropped backend takes its recorder with it. Only for turns composed outside a
#: runtime: a ``Runtime`` keeps the recorders of its backend itself (``TurnState.recorders``).
_recorders: weakref.WeakKeyDictionary[Any, dict[Policy, PromptRecorder]] = weakref.WeakKeyDictionary()
_recorders_by_id: dict[int, tuple[Any, dict[Policy, PromptRecorder]]] = {}


def _policy(request: ProjectionRequest) -> Policy:
    cfg = request.config
    obs = cfg.observability
    return (
        cfg.context.capture_full_text,
        obs.trajectory,
        tuple(obs.redact_patterns),
        obs.redact_defaults,
        obs.full_text_max_bytes,
    )


def recorder_for(
    backend: Backend, request: ProjectionRequest, state: TurnState | None = None
) -> PromptRecorder:
    """The recorder writing to ``backend`` under the request's recording policy (made on first
    use; a request with another policy, e.g. full-text capture on, gets its own): the runtime's
    (``state.recorders``) for a turn a runtime composed, else the process-wide one."""
    policy = _policy(request)
    with _lock:
        by_policy = state.recorders if state is not None and state.recorders is not None else None
        if by_policy is None:
            by_policy = _process_recorders(backend)
        found = by_policy.get(policy)
        if found is not None:
            return found
        recorder = by_policy[policy] = new_recorder(backend, policy)
        return recorder


def _process_recorders(backend: Backend) -> dict[Policy, PromptRecorder]:
    try:
        by_policy = _recorders.get(backend)
        if by_policy is None:
            by_policy = _recorders[backend] = {}
    except TypeError:  # not weak-referenceable: keep it for the life of the process
        pair = _recorders_by_id.get(id(backend))
        if pair is None or pair[0] is not backend:
            pair = _recorders_by_id[id(backend)] = (backend, {})
        by_policy = pair[1]
    return by_policy


def new_recorder(backend: Backend, policy: Policy) -> PromptRecorder:
    """A recorder writing to ``backend`` under ``policy``."""
    capture, trajectory, patterns, defaults, max_bytes = policy
    return PromptRecorder(
        backend.snapshots,
        backend.trajectory if trajectory else None,
        capture_full_text=capture,
        redactor=Redactor.from_patterns(list(patterns), defaults=defaults),
        full_text_max_bytes=max_bytes,
    )


def _state(projection: ProjectedContext, request: ProjectionRequest) -> TurnState | None:
    """The turn's record state: the one its runtime attached, else one recording to the
    request's backend (attached now, for the turn's later calls); None when the turn has no
    backend (said once)."""
    state = state_of(projection)
    if state is None:
        state = ensure(projection, request.backend)
    if state.backend is None:
        log_once(
            log,
            ("no-backend", type(request.knowledge_store)),
            logging.WARNING,
            "turn of session %r has no backend (memory store %s belongs to none), so no injection log "
            "row and no prompt snapshot is recorded; pass backend= or open one with open_backend()",
            request.session_id,
            type(request.knowledge_store).__name__,
        )
        return None
    return state


def _turn_of(
    projection: ProjectedContext, state: TurnState, recorder: PromptRecorder, request: ProjectionRequest
) -> TurnRecord:
    """The turn's record, kept on the turn (its ``TurnState``) for its model calls."""
    turn = state.record
    if turn is None:  # an incognito turn (never observed at composition), or a record turned on late
        turn = state.record = recorder.begin_turn(
            projection, query=request.query, reason=str(request.extra.get("reason", "turn"))
        )
    return turn


def _mark(projection: ProjectedContext, status: str) -> None:
    """Set the projection's ``record_status`` (a frozen attrs slot; only this module writes it).
    A failure sticks: a later successful write of the same turn does not hide it."""
    if not projection.record_status.startswith("failed"):
        object.__setattr__(projection, "record_status", status)


def _failed(projection: ProjectedContext, what: str, exc: BaseException) -> None:
    detail = str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
    _mark(projection, f"failed: {what}: {' '.join(detail.split())}")


@contextlib.contextmanager
def _reporting(projection: ProjectedContext, what: str) -> Iterator[None]:
    """Mark the projection "recorded" when the block's writes succeed (an incognito turn, whose
    snapshot keeps only references and sizes, stays "not recorded"), "failed: ..." when one
    does not, re-raising for the host to isolate and log once."""
    try:
        yield
    except Exception as exc:
        _failed(projection, what, exc)
        raise
    if not projection.incognito:
        _mark(projection, "recorded")


@hookimpl
def observe_projection(projection: ProjectedContext, request: ProjectionRequest) -> None:
    """The injection-log row and the turn's trajectory entry."""
    if projection.injection is None or projection.incognito:
        return
    state = _state(projection, request)
    if state is None:
        return
    with _reporting(projection, "storing the turn's injection-log row and inputs"):
        _observe_projection(state, projection, request)


def _observe_projection(state: TurnState, projection: ProjectedContext, request: ProjectionRequest) -> None:
    backend = state.backend
    assert backend is not None  # ``_state`` answers None for a turn with no backend
    backend.injections.record(_injection_row(projection))
    if request.config.observability.snapshots:
        recorder = recorder_for(backend, request, state)
        reason = str(request.extra.get("reason", "turn"))
        turn = state.record = recorder.begin_turn(projection, query=request.query, reason=reason)
        if request.config.observability.turn_inputs:
            _record_inputs(state, backend, projection, request, turn)


def _injection_row(projection: ProjectedContext) -> InjectionRow:
    record = projection.injection
    assert record is not None
    return InjectionRow(
        session_id=record.session_id,
        turn_index=record.turn_index,
        at=record.at,
        mode=projection.mode,
        approx_tokens=record.approx_tokens,
        used_chars=projection.used_chars,
        budget_chars=projection.budget_chars,
        delivered=record.delivered,
    )


def _inputs_of(
    state: TurnState,
    backend: Backend,
    projection: ProjectedContext,
    request: ProjectionRequest,
    turn: TurnRecord,
) -> TurnInputs | None:
    """The turn's inputs, or None (said once) when the backend's snapshot store keeps none."""
    store = backend.snapshots
    if not isinstance(store, TurnInputStore):
        log_once(
            log,
            ("no-turn-inputs", type(store)),
            logging.WARNING,
            "snapshot store %s keeps no turn inputs (contextplane.records.TurnInputStore), so past turns "
            "of this backend cannot be explained or replayed",
            type(store).__name__,
        )
        return None
    return turn_inputs(
        projection,
        request,
        trajectory_ref=turn.trajectory_ref,
        projection_sha256=turn.projection_sha256,
        config=state.config_json(request.config),
    )


def _record_inputs(
    state: TurnState,
    backend: Backend,
    projection: ProjectedContext,
    request: ProjectionRequest,
    turn: TurnRecord,
) -> None:
    inputs = _inputs_of(state, backend, projection, request, turn)
    if inputs is not None:  # not None only when the snapshot store is a TurnInputStore
        cast(TurnInputStore, backend.snapshots).put_inputs(inputs)


@hookimpl
def observe_model_call(call: ModelCall, request: ProjectionRequest) -> None:
    """One prompt snapshot for the call (references and sizes only when incognito)."""
    if not request.config.observability.snapshots:
        return
    projection = call.projection
    state = _state(projection, request)
    if state is None:
        return
    with _reporting(projection, f"storing the prompt snapshot of model call {call.call_index}"):
        _observe_model_call(state, call, request)


def _observe_model_call(state: TurnState, call: ModelCall, request: ProjectionRequest) -> None:
    projection = call.projection
    backend = state.backend
    assert backend is not None  # ``_state`` answers None for a turn with no backend
    recorder = recorder_for(backend, request, state)
    turn = _turn_of(projection, state, recorder, request)
    incognito = projection.incognito
    prefix = recorder.register_prefix(call.prefix, session_id=projection.session_id, incognito=incognito)
    recorder.capture(
        session_id=projection.session_id,
        turn_index=projection.turn_index,
        call_index=call.call_index,
        prefix=prefix,
        turn=turn,
        stripped=call.stripped,
        history_messages=call.history_messages,
        history_chars=call.history_chars,
        incognito=incognito,
        mode=projection.mode,
        full_text=call.full_text,
    )


# --- the async twins: what ``PluginHost.anotify_*`` awaits on the async path --------------------


def _in_threads(backend: Backend, request: ProjectionRequest, *parts: str) -> bool:
    """True when writing the turn's records to ``backend`` would hop to worker threads anyway:
    a part's async methods are thread hops (``records.aio.in_threads``: the embedded SQLite
    parts), or the trajectory (a file) is kept. The records are then written in one worker
    thread, by the synchronous hook, instead of a hop per row."""
    if request.config.observability.trajectory and backend.trajectory is not None:
        return True
    return any(records_aio.in_threads(getattr(backend, part)) for part in parts)


async def aobserve_projection(projection: ProjectedContext, request: ProjectionRequest) -> None:
    """``observe_projection`` for an event loop: the same rows, never blocking the loop."""
    if projection.injection is None or projection.incognito:
        return
    state = _state(projection, request)
    if state is None or state.backend is None:
        return
    backend = state.backend
    snapshots = request.config.observability.snapshots
    if _in_threads(backend, request, "injections", *(("snapshots",) if snapshots else ())):
        await asyncio.to_thread(observe_projection, projection, request)
        return
    with _reporting(projection, "storing the turn's injection-log row and inputs"):
        await _aobserve_projection(state, backend, projection, request, snapshots)


async def _aobserve_projection(
    state: TurnState,
    backend: Backend,
    projection: ProjectedContext,
    request: ProjectionRequest,
    snapshots: bool,
) -> None:
    await records_aio.arecord(backend.injections, _injection_row(projection))
    if snapshots:
        recorder = recorder_for(backend, request, state)
        reason = str(request.extra.get("reason", "turn"))
        # no trajectory here (it would be written in a thread, above): no I/O
        turn = state.record = recorder.begin_turn(projection, query=request.query, reason=reason)
        if request.config.observability.turn_inputs:
            inputs = _inputs_of(state, backend, projection, request, turn)
            if inputs is not None:
                await records_aio.aput_inputs(backend.snapshots, inputs)


async def aobserve_model_call(call: ModelCall, request: ProjectionRequest) -> None:
    """``observe_model_call`` for an event loop: the same snapshot, never blocking the loop."""
    if not request.config.observability.snapshots:
        return
    state = _state(call.projection, request)
    if state is None or state.backend is None:
        return
    if _in_threads(state.backend, request, "snapshots"):
        await asyncio.to_thread(observe_model_call, call, request)
        return
    with _reporting(call.projection, f"storing the prompt snapshot of model call {call.call_index}"):
        await _aobserve_model_call(state, state.backend, call, request)


async def _aobserve_model_call(
    state: TurnState, backend: Backend, call: ModelCall, request: ProjectionRequest
) -> None:
    projection = call.projection
    recorder = recorder_for(backend, request, state)
    turn = _turn_of(projection, state, recorder, request)
    incognito = projection.incognito
    prefix = await recorder.aregister_prefix(
        call.prefix, session_id=projection.session_id, incognito=incognito
    )
    await recorder.acapture(
        session_id=projection.session_id,
        turn_index=projection.turn_index,
        call_index=call.call_index,
        prefix=prefix,
        turn=turn,
        stripped=call.stripped,
        history_messages=call.history_messages,
        history_chars=call.history_chars,
        incognito=incognito,
        mode=projection.mode,
        full_text=call.full_text,
    )
