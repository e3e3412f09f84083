"""The record pipeline: one built-in plugin that records every turn through the hooks.

It is registered on every ``PluginHost`` (name ``contextplane.records``) and is the only
thing that writes a turn's records, so no adapter carries recorder choreography:

- ``observe_projection`` (recorded, never incognito): one injection-log row, and the turn's
  manifest plus its trajectory entry, built once per composition, and its inputs
  (``records.turn_inputs``: what ``explain`` and ``replay`` read back);
- ``observe_model_call`` (every delivered call, incognito flagged): one prompt snapshot, the
  stable prefix stored once per hash and one trajectory entry per session and prefix.

What the rows hold is decided by ``contextplane.recorder`` (sans-IO); the hooks here choose
the turn's recorder and backend and return the rows as ``Writes`` (the hooks are ``sans_io``):
the plugin host performs them, synchronously from ``notify_*`` and from the event loop from
``anotify_*`` (``contextplane.records.plans``), the same plan and so the same rows; there is
no async twin.

Everything goes to the request's backend; a turn with no backend records nothing, and says
so once in the log. ``plugins.disabled = ["contextplane.records"]`` turns recording off.

A record write that fails (a full disk, a database that went away) never fails the turn: the
observer marks the projection's ``record_status`` "failed: ..." and re-raises, so the plugin
host isolates it like any observer failure (logged once with its traceback, kept in
``host.failures``, raised in strict mode). Before issue 26 the turn said nothing of it, so a
caller could not tell a turn that can be explained from one that cannot.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, TypeVar

from contextplane.errors import StoreError
from contextplane.hookspecs import hookimpl
from contextplane.notices import log_once
from contextplane.observability.turn import TurnState, ensure, state_of
from contextplane.recorder import Plan, Policy, Recorder, TurnRecord, policy_of
from contextplane.records.backend import Backend
from contextplane.records.cache_prefix import tracker_of
from contextplane.records.plans import Writes, sans_io
from contextplane.request import ProjectionRequest
from contextplane.types import ModelCall, ProjectedContext

PLUGIN_NAME = "contextplane.records"
log = logging.getLogger("contextplane.records")

T = TypeVar("T")

_lock = threading.Lock()
#: One recorder per backend (it remembers prefix hashes and per-session trajectory refs); weak,
#: so a closed and dropped backend takes its recorder with it. Only for turns composed outside
#: a runtime: a ``Runtime`` keeps the recorders of its backend itself (``TurnState.recorders``).
_recorders: weakref.WeakKeyDictionary[Any, dict[Policy, Recorder]] = weakref.WeakKeyDictionary()
#: Backends that cannot be weakly referenced, with their recorders, found by identity (``is``).
_unhashable: list[tuple[Any, dict[Policy, Recorder]]] = []

#: The record hooks' work as plans: (the turn's state, the plan, what ``record_status`` says
#: on failure); None when there is nothing to record.
_Job = tuple[TurnState, Plan[TurnRecord | None], str]


def recorder_for(backend: Backend, request: ProjectionRequest, state: TurnState | None = None) -> Recorder:
    """The recorder for ``backend`` under the request's recording policy (made on first use; a
    request with another policy, e.g. full-text capture on, gets its own): the runtime's
    (``state.recorder``, else ``state.recorders``) for a turn a runtime composed, else the
    process-wide one."""
    if state is not None and state.recorder is not None:  # the one its runtime chose
        return state.recorder
    policy = policy_of(request)
    with _lock:
        by_policy = state.recorders if state is not None and state.recorders is not None else None
        if by_policy is None:
            by_policy = _process_recorders(backend)
        found = by_policy.get(policy)
        if found is not None:
            return found
        recorder = by_policy[policy] = new_recorder(backend, policy)
        return recorder


def _process_recorders(backend: Backend) -> dict[Policy, Recorder]:
    try:
        by_policy = _recorders.get(backend)
        if by_policy is None:
            by_policy = _recorders[backend] = {}
    except TypeError:  # not weak-referenceable: keep it for the life of the process
        by_policy = next((held for owner, held in _unhashable if owner is backend), None)
        if by_policy is None:
            by_policy = {}
            _unhashable.append((backend, by_policy))
    return by_policy


def new_recorder(backend: Backend, policy: Policy) -> Recorder:
    """The recorder of ``policy`` for ``backend`` (a trajectory only when the backend keeps one)."""
    return Recorder.of(policy, trajectory=backend.trajectory is not None, cache=tracker_of(backend))


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


def _mark(projection: ProjectedContext, status: str) -> None:
    """Set the projection's ``record_status`` (a frozen attrs slot; only this module writes it).
    A failure sticks: a later successful write of the same turn does not hide it."""
    if not projection.record_status.startswith("failed"):
        object.__setattr__(projection, "record_status", status)


def _failed(projection: ProjectedContext, what: str, exc: BaseException) -> None:
    detail = str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
    _mark(projection, f"failed: {what}: {' '.join(detail.split())}")


def _reported(projection: ProjectedContext, what: str, plan: Plan[T]) -> Plan[T]:
    """``plan``, marking the projection "recorded" when its writes succeed (an incognito turn,
    whose snapshot keeps only references and sizes, stays "not recorded"), "failed: ..." when
    one does not (the writer throws the failure into the plan), re-raising for the host to
    isolate and log once."""
    try:
        done = yield from plan
    except Exception as exc:
        _failed(projection, what, exc)
        raise
    if not projection.incognito:
        _mark(projection, "recorded")
    return done


def _projection_job(projection: ProjectedContext, request: ProjectionRequest) -> _Job | None:
    """The injection-log row, and with snapshots on the turn's manifest, trajectory entry and
    inputs, as a plan for the turn's backend."""
    if projection.injection is None or projection.incognito:
        return None
    state = _state(projection, request)
    if state is None:
        return None
    backend = state.backend
    assert backend is not None  # ``_state`` answers None for a turn with no backend
    obs = request.config.observability
    plan = recorder_for(backend, request, state).projection(
        projection,
        request,
        snapshots=obs.snapshots,
        inputs=obs.snapshots and obs.turn_inputs and state.keeps_turn_inputs(),
        config=state.config_json(request.config),
        keep=state.keep,
    )
    return state, plan, "storing the turn's injection-log row and inputs"


def _call_job(call: ModelCall, request: ProjectionRequest) -> _Job | None:
    """One prompt snapshot for the call (references and sizes only when incognito), as a plan."""
    if not request.config.observability.snapshots:
        return None
    state = _state(call.projection, request)
    if state is None:
        return None
    backend = state.backend
    assert backend is not None
    recorder = recorder_for(backend, request, state)
    turn = state.record
    reason = "turn" if turn is not None else str(request.extra.get("reason", "turn"))
    plan = recorder.call(call, turn, query=request.query, reason=reason, keep=state.keep)
    return state, plan, f"storing the prompt snapshot of model call {call.call_index}"


@hookimpl
@sans_io
def observe_projection(projection: ProjectedContext, request: ProjectionRequest) -> Writes[Any] | None:
    """The injection-log row and the turn's trajectory entry and inputs, for the host to write."""
    job = _projection_job(projection, request)
    return None if job is None else Writes(job[0].backend, _reported(projection, job[2], job[1]))


@hookimpl
@sans_io
def observe_model_call(call: ModelCall, request: ProjectionRequest) -> Writes[Any] | None:
    """One prompt snapshot for the call (references and sizes only when incognito), for the
    host to write."""
    job = _call_job(call, request)
    return None if job is None else Writes(job[0].backend, _reported(call.projection, job[2], job[1]))
