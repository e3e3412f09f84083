"""``Runtime``: a deployment wired once, then one turn after another (issue 25).

Before the runtime, every composition found its own wiring: the backend for the request's
store (``backend_of``, ``resolve_backend``, ``SQLiteBackend.around``), the recorder for the
backend, and, at each model call, the turn's record parked under ``id(projection)``. A
``Runtime`` settles the wiring once (the plugin host, the memory store and the backend
resolved from each other, the stable prefix, the recorders of its backend) and hands it down:

    with open_runtime(config) as runtime:
        turn = runtime.compose(runtime.request("when is the deploy window?", session_id="s1"))
        messages = runtime.deliver(turn, history, PLAIN, call_index=0).messages

``compose`` / ``acompose`` return a ``Turn``: the ``ProjectedContext`` and what the record
pipeline carries from the composition to each model call of the turn. ``deliver`` /
``adeliver`` place the projection for one call through a ``MessageCodec`` (the adapter's
message type) and have the call's snapshot recorded. Adapters (the LangGraph middleware, the
external assembler) hold one runtime each. ``compose_projected_context`` and
``projection.compose`` keep working for callers that wire nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, cast

import attrs

from contextplane.authority import build_stable_prefix
from contextplane.backends import open_backend, resolve_backend
from contextplane.config import Config
from contextplane.delivery import PLAIN, MessageCodec, placed
from contextplane.engine.async_driver import acompose_turn
from contextplane.engine.driver import compose_turn
from contextplane.errors import ContextPlaneError, ValidationError
from contextplane.observability.turn import Policy, TurnState, ensure, keeps_inputs
from contextplane.observability.turn_inputs import dump_config
from contextplane.plugins import PluginHost, get_host
from contextplane.recorder import Recorder, policy_of
from contextplane.records.backend import Backend, is_backend
from contextplane.records.cache_prefix import tracker_of
from contextplane.request import BuildContext, ProjectionRequest, Surface
from contextplane.signatures import method_awaiting, method_same_as
from contextplane.store.protocol import KnowledgeStore
from contextplane.types import Delivered, M, ProjectedContext, StablePrefix

__all__ = ["PLAIN", "MessageCodec", "Runtime", "Turn", "open_runtime"]


@attrs.frozen
class Turn:
    """One composed turn on its way to its model calls: the projection, and the record state
    its calls share (the backend, the runtime's recorders, the turn's record once written).

    Handed from ``Runtime.compose`` to every ``Runtime.deliver`` of the turn; nothing about the
    turn is looked up in a process-wide registry."""

    projection: ProjectedContext
    state: TurnState = attrs.field(repr=False)

    @property
    def request(self) -> ProjectionRequest | None:
        return self.projection.request

    @property
    def text(self) -> str:
        return self.projection.text

    @classmethod
    def of(cls, projection: ProjectedContext) -> Turn:
        """The turn of a projection composed elsewhere (``compose``, an adapter's older API):
        its attached state, or a new one recording to the projection's request's backend."""
        request = projection.request
        return cls(projection, ensure(projection, request.backend if request is not None else None))


@attrs.frozen
class Wiring:
    """The memory store sections read and the backend the records go to, resolved once."""

    knowledge_store: KnowledgeStore | None
    backend: Backend | None


class _Default:
    """The runtime's own stable prefix (a call that passes no ``prefix``)."""


_RUNTIME_PREFIX = _Default()


class Runtime:
    """A deployment wired once: the host, the store and backend, the stable prefix, the
    recorders. See the module docstring; ``open_runtime`` is the usual way to get one.

    ``knowledge_store`` and ``backend`` are resolved from each other the first time the
    runtime composes (a store's own backend receives the records unless ``backend`` names
    another; a backend passed as the store is the backend), and never again. ``prefix`` is
    the stable prefix delivered as the system prompt; with ``build`` and no ``prefix`` it is
    built from the host on first use (ADR D1: once per runtime). ``owns_backend``: ``close``
    closes the backend."""

    def __init__(
        self,
        *,
        host: PluginHost | None = None,
        config: Config | None = None,
        backend: Backend | None = None,
        knowledge_store: KnowledgeStore | Backend | None = None,
        skills_index: Sequence[Any] | None = None,
        prefix: StablePrefix | str | None = None,
        build: BuildContext | None = None,
        strict: bool | None = None,
        owns_backend: bool = False,
    ) -> None:
        self.host = host if host is not None else get_host(config)
        self.config = config if config is not None else self.host.config
        self.skills_index = skills_index
        self.strict = strict
        self._given = (knowledge_store, backend)
        self._wiring: Wiring | None = None
        self._prefix = prefix
        self._build = build
        self._owns_backend = owns_backend
        self._lock = threading.Lock()
        #: The (sans-IO) recorders of this runtime's backend by recording policy (prefix hashes
        #: and per-session trajectory refs live in them), shared by every turn it composes.
        self._recorders: dict[Policy, Recorder] = {}
        #: The configuration with its JSON and hash, dumped once (what turn inputs record).
        self._config_json: tuple[Config, str, str] | None = None
        #: Whether the backend keeps turn inputs (asked once, on the first recorded turn).
        self._keeps: bool | None = None
        self._closed = False

    # --- wiring ----------------------------------------------------------------------------

    def wiring(self) -> Wiring:
        """The store and backend, resolved on first use and kept (the one resolution)."""
        found = self._wiring
        if found is not None:
            return found
        with self._lock:
            if self._wiring is None:
                self._wiring = _resolved(*self._given, self.config)
            return self._wiring

    @property
    def backend(self) -> Backend | None:
        return self.wiring().backend

    @property
    def given_store(self) -> KnowledgeStore | Backend | None:
        """The store (or backend) the runtime was opened with, as given (``knowledge_store``)."""
        return self._given[0]

    @property
    def knowledge_store(self) -> KnowledgeStore | None:
        return self.wiring().knowledge_store

    @property
    def prefix(self) -> StablePrefix | str | None:
        """The stable prefix: the one given, else built once from the host (with ``build``)."""
        if self._prefix is None and self._build is not None:
            with self._lock:
                if self._prefix is None:
                    self._prefix = build_stable_prefix(self.host, self._build)
        return self._prefix

    # --- turns -----------------------------------------------------------------------------

    def request(
        self,
        query: str,
        *,
        session_id: str = "",
        turn_index: int = 0,
        state: Mapping[str, Any] | None = None,
        surface: Surface | str = Surface.NATIVE,
        incognito: bool = False,
        goal_turn: bool = False,
        only_sections: Iterable[str] | None = None,
        budget_tokens: int | None = None,
        context_window: int | None = None,
        project: str | None = None,
        record: bool = True,
        skills_index: Sequence[Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ProjectionRequest:
        """The turn's ``ProjectionRequest``, carrying the runtime's store and backend (the
        fields sections read them from) and its project unless ``project`` names another."""
        wiring = self.wiring()
        return ProjectionRequest(
            query=query,
            config=self.config,
            knowledge_store=wiring.knowledge_store,
            skills_index=skills_index if skills_index is not None else self.skills_index,
            state=state or {},
            session_id=session_id,
            turn_index=turn_index,
            project=project if project is not None else self.config.context.project,
            surface=surface,
            incognito=incognito,
            goal_turn=goal_turn,
            only_sections=only_sections,
            budget_tokens=budget_tokens,
            context_window=context_window,
            record=record,
            backend=wiring.backend,
            extra=extra or {},
        )

    def compose(self, request: ProjectionRequest) -> Turn:
        """Compose the turn's projection (``projection.compose``'s composition, with nothing
        resolved again); observers are told as ``compose`` tells them."""
        request, state = self._wired(request)
        projection = compose_turn(request, self.host, self.strict, state)
        return self._turn(projection, state)

    async def acompose(self, request: ProjectionRequest) -> Turn:
        """``compose`` for an event loop: the same projection, byte for byte."""
        request, state = self._wired(request)
        projection = await acompose_turn(request, self.host, self.strict, state)
        return self._turn(projection, state)

    def _call(
        self,
        turn: Turn | ProjectedContext,
        history: Sequence[M],
        codec: MessageCodec[M] = PLAIN,
        *,
        call_index: int,
        prefix: StablePrefix | str | _Default | None = _RUNTIME_PREFIX,
    ) -> Delivered[M]:
        """The parameters of ``deliver`` and ``adeliver``, written once, and their one body
        but telling the observers: ``history`` without context frames, then the projection."""
        self._check_open()
        if isinstance(turn, ProjectedContext):
            turn = Turn.of(turn)
        elif not isinstance(turn, Turn):
            raise ValidationError(
                f"Runtime.deliver takes the Turn runtime.compose returned (or its ProjectedContext), "
                f"got {type(turn).__name__}"
            )
        chosen = self.prefix if isinstance(prefix, _Default) else prefix
        return placed(turn.projection, history, chosen, call_index, codec)

    @method_same_as(_call)
    def deliver(self, *args: Any, **kwargs: Any) -> Any:
        """Prepare one model call of ``turn``: ``history`` without context frames, then the
        projection (``codec.wrap``); the call's snapshot is recorded when the turn was composed
        to be recorded. ``prefix`` is what the model sees as the system prompt (default: the
        runtime's)."""
        delivered = self._call(*args, **kwargs)
        request = delivered.call.projection.request
        if request is not None and request.record:
            self.host.notify_model_call(delivered.call, request)
        return delivered

    @method_awaiting(_call)
    async def adeliver(self, *args: Any, **kwargs: Any) -> Any:
        """``deliver`` for an event loop: the same messages; the snapshot is written without
        blocking the loop, before the model is called."""
        delivered = self._call(*args, **kwargs)
        request = delivered.call.projection.request
        if request is not None and request.record:
            await self.host.anotify_model_call(delivered.call, request)
        return delivered

    # --- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the backend when the runtime opened it (``open_runtime`` with no backend and no
        store); a backend handed in stays its owner's to close."""
        if self._closed:
            return
        self._closed = True
        if self._owns_backend and self._wiring is not None and self._wiring.backend is not None:
            self._wiring.backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- inside ----------------------------------------------------------------------------

    def _wired(self, request: ProjectionRequest) -> tuple[ProjectionRequest, TurnState | None]:
        """The request with the runtime's wiring, and the turn's state; (request, None) for a
        request that names a store or backend of its own (composed as ``compose`` would)."""
        self._check_open()
        if not isinstance(request, ProjectionRequest):
            raise ValidationError(
                f"Runtime.compose takes a ProjectionRequest (make one with runtime.request(...)), "
                f"got {type(request).__name__}"
            )
        wiring = self.wiring()
        store, backend = request.knowledge_store, request.backend
        if backend is None and (store is None or store is wiring.knowledge_store):
            store, backend = wiring.knowledge_store, wiring.backend
        elif backend is not wiring.backend or store is not wiring.knowledge_store:
            return request, None
        project = request.project if request.project is not None else self.config.context.project
        if (
            store is not request.knowledge_store
            or backend is not request.backend
            or project != request.project
        ):
            request = attrs.evolve(request, knowledge_store=store, backend=backend, project=project)
        recorder = self._recorder(request, backend) if request.record else None
        return request, TurnState(
            backend,
            self._recorders,
            self._dumped_config(request),
            recorder=recorder,
            keeps_inputs=self._keeps_inputs(backend) if recorder is not None else None,
        )

    def _keeps_inputs(self, backend: Backend | None) -> bool | None:
        """Whether the runtime's backend keeps turn inputs, asked of it once (None: another
        backend than the runtime's, asked when its turn is recorded)."""
        if backend is None or backend is not self.wiring().backend:
            return None
        found = self._keeps
        if found is None:
            found = self._keeps = keeps_inputs(backend)
        return found

    def _recorder(self, request: ProjectionRequest, backend: Backend | None) -> Recorder | None:
        """The turn's recorder: the runtime's for the request's recording policy (made once)."""
        if backend is None:
            return None
        policy = policy_of(request)
        found = self._recorders.get(policy)
        if found is None:
            with self._lock:
                found = self._recorders.setdefault(
                    policy,
                    Recorder.of(policy, trajectory=backend.trajectory is not None, cache=tracker_of(backend)),
                )
        return found

    def _check_open(self) -> None:
        if self._closed:
            raise ContextPlaneError(
                "this Runtime is closed (close() or the end of its with block); open another with "
                "open_runtime(...) for more turns"
            )

    def _dumped_config(self, request: ProjectionRequest) -> tuple[Config, str, str] | None:
        """The configuration dumped once, for a turn whose inputs will be recorded."""
        if not (request.record and request.config.observability.turn_inputs):
            return None
        dumped = self._config_json
        if dumped is None:
            dumped = self._config_json = (self.config, *dump_config(self.config))
        return dumped

    @staticmethod
    def _turn(projection: ProjectedContext, state: TurnState | None) -> Turn:
        return Turn(projection, state) if state is not None else Turn.of(projection)


def _resolved(store: KnowledgeStore | Backend | None, backend: Backend | None, config: Config) -> Wiring:
    """The store and backend from each other, as ``projection`` resolves a bare request's."""
    memories: KnowledgeStore | None
    if store is not None and is_backend(store):  # a backend passed as the store
        backend = backend if backend is not None else store
        memories = store.memories
    else:
        memories = cast(KnowledgeStore | None, store)
    if backend is None:
        backend = resolve_backend(memories, config)
    if memories is None and backend is not None:
        memories = backend.memories
    return Wiring(memories, backend)


def open_runtime(
    config: Config | None = None,
    *,
    backend: Backend | None = None,
    knowledge_store: KnowledgeStore | Backend | None = None,
    host: PluginHost | None = None,
    prefix: StablePrefix | str | None = None,
    tools: Sequence[str] = (),
    tool_descriptions: Mapping[str, str] | None = None,
    skills_index: Sequence[Any] | None = None,
    strict: bool | None = None,
) -> Runtime:
    """Wire a deployment once: the plugin host (``host``, else the one the installed plugins'
    entry points make for ``config``), the backend (``backend``; else the one
    ``knowledge_store`` belongs to; else the deployment's, ``open_backend``, which the runtime
    then owns and closes), and the stable prefix (``prefix``, else built once from the host
    with ``tools`` as the bound tool names)."""
    host = host if host is not None else get_host(config)
    cfg = config if config is not None else host.config
    owns = backend is None and knowledge_store is None
    if owns:
        backend = open_backend(host)
    runtime: Runtime = Runtime(
        host=host,
        config=cfg,
        backend=backend,
        knowledge_store=knowledge_store,
        skills_index=skills_index,
        prefix=prefix,
        build=None
        if prefix is not None
        else BuildContext(config=cfg, tools=tuple(tools), tool_descriptions=dict(tool_descriptions or {})),
        strict=strict,
        owns_backend=owns,
    )
    runtime.wiring()  # resolved here, once
    return runtime
