"""``ContextPlaneMiddleware``: project per turn, deliver per call, never persist (ADR D2).

Lifecycle of one turn on a ``langchain.agents.create_agent`` graph:

The middleware is a thin layer over a ``contextplane.runtime.Runtime`` (``self.runtime``),
made once with the middleware: the store and backend are resolved on its first turn and never
again, and each turn's record state travels on its ``Turn`` from composition to the calls.

1. ``before_agent`` builds the turn's ``ProjectionRequest`` (``Runtime.request``: surface
   ``NATIVE``, the incognito and goal-turn flags, ``extra={"reason": ...}``), composes it once
   (``Runtime.compose``; the records observer writes the injection-log row and
   the trajectory entry) and returns the turn's carrier in the private, untracked channel
   ``contextplane_projection``
   (``Annotated[..., UntrackedValue, PrivateStateAttr]``): never checkpointed, absent from
   ``invoke`` results and ``get_state()``, and scoped to this run. Nothing turn-scoped lives
   on the middleware instance, because one compiled graph serves every concurrent turn.
2. ``before_model`` finds the channel empty only on a run that skipped ``before_agent``: a
   resume (``Command(resume=...)``). It then recomposes once, querying with the turn's
   newest operator input, which writes its own injection-log row.
3. ``wrap_model_call`` / ``awrap_model_call`` call ``Runtime.deliver`` once, with the turn's
   ``ProjectionCarrier`` as the ``MessageCodec`` (LangChain messages):
   it strips context frames stored by v1 from the model-visible list, appends the projection
   as the last message and tells the ``observe_model_call`` observers (the records observer
   writes the prompt snapshot). The middleware then places cache breakpoints on the stable
   prefix and the last history block if caching is on, and hands the result to the model
   through ``request.override(messages=...)``. No state update carries the projection.

Each hook has an async twin that does the same on the async path (``ainvoke``, ``astream``):
``abefore_agent`` / ``abefore_model`` compose with ``Runtime.acompose`` and
``awrap_model_call`` delivers with ``Runtime.adeliver``, so no store query, query
embedding or record write of a turn runs on the graph's event loop.

What stream consumers see is documented in docs/runtime.md ("Streams and tracing");
``without_projection`` removes the channel from a stream chunk.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.channels import UntrackedValue
from langgraph.runtime import Runtime

from contextplane.authority import StablePrefix, build_stable_prefix
from contextplane.config import Config
from contextplane.observability.turn import TurnState
from contextplane.plugins import PluginHost, get_host
from contextplane.projection import ProjectedContext
from contextplane.request import BuildContext, ProjectionRequest, Surface
from contextplane.runtime import Runtime as ContextRuntime
from contextplane.runtime import Turn
from contextplane.subagents import SubagentContract, build_subagent_prompt, check_contract, subagent_request
from contextplane_langgraph.caching import place_breakpoints
from contextplane_langgraph.frames import PROJECTION_MARKER, is_context_frame, sent_text, turn_position

PROJECTION_KEY = "contextplane_projection"
#: State keys that are agent machinery, not working state, so never handed to sections.
_NOT_WORKING_STATE = frozenset({"messages", PROJECTION_KEY, "jump_to", "structured_response"})

Flag = bool | Callable[[Mapping[str, Any], Any], bool]


#: LangChain message types as the chat roles plain messages use, so a full-text snapshot reads
#: the same whichever surface delivered it.
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _role(message: BaseMessage) -> str:
    return _ROLES.get(str(message.type), str(message.type))


class ProjectionCarrier:
    """One turn's projection on its way from ``before_agent`` to the model calls: the
    runtime's ``Turn``, and the ``MessageCodec`` delivery reads LangChain messages through.

    Its ``repr`` shows sizes and a hash, never the text, so a stream consumer that prints
    chunks (``updates``, ``values``, ``debug``, ``astream_events``) does not print memory.
    """

    __slots__ = ("message", "projection", "query", "reason", "turn")
    projection: ProjectedContext
    message: HumanMessage | None
    query: str
    reason: str
    turn: Turn

    def __init__(
        self,
        projection: ProjectedContext,
        message: HumanMessage | None,
        query: str,
        reason: str,
        turn: Turn | None = None,
    ) -> None:
        self.projection = projection
        self.message = message
        self.query = query
        self.reason = reason
        self.turn = turn if turn is not None else Turn.of(projection)

    def wrap(self, text: str) -> BaseMessage:
        """The projection message ``deliver`` places last: the one built for the turn."""
        if self.message is not None:
            return self.message
        return projection_message(text, self.projection.turn_index)  # not reached: deliver wraps text only

    # The codec's readers are the functions themselves (delivery calls them once per message).
    is_frame = staticmethod(is_context_frame)
    text_of = staticmethod(sent_text)
    role_of = staticmethod(_role)

    @property
    def text(self) -> str:
        return str(self.projection.text)

    def __repr__(self) -> str:
        p = self.projection
        digest = hashlib.sha256(p.text.encode()).hexdigest()[:12] if p.text else "-"
        return (
            f"<ProjectionCarrier session={p.session_id!r} turn={p.turn_index} reason={self.reason} "
            f"chars={p.used_chars} sha256={digest}>"
        )


class ContextPlaneState(AgentState[Any]):
    """The agent state plus the private, untracked projection channel."""

    contextplane_projection: NotRequired[
        Annotated[ProjectionCarrier | None, UntrackedValue, PrivateStateAttr]
    ]


def _flag(value: Flag, name: str, state: Mapping[str, Any], runtime: Any) -> bool:
    if callable(value):
        return bool(value(state, runtime))
    ctx = getattr(runtime, "context", None)
    if isinstance(ctx, Mapping) and name in ctx:
        return bool(ctx[name])
    if ctx is not None and not isinstance(ctx, Mapping) and hasattr(ctx, name):
        return bool(getattr(ctx, name))
    return bool(value)


def projection_message(text: str, turn_index: int) -> HumanMessage:
    """The projection as a ``HumanMessage`` marked as a context frame, so a later turn strips it."""
    return HumanMessage(
        content=text, additional_kwargs={PROJECTION_MARKER: True}, id=f"contextplane-projection-{turn_index}"
    )


def without_projection(chunk: Any) -> Any:
    """A copy of a stream chunk with the private projection channel removed, at any depth.

    Works on ``values``, ``updates`` and ``debug`` chunks, on ``(mode, chunk)`` tuples from
    multi-mode streams, and on ``astream_events`` event dicts. Messages are not copied.
    """
    if isinstance(chunk, dict):
        return {k: without_projection(v) for k, v in chunk.items() if k != PROJECTION_KEY}
    if isinstance(chunk, list):
        return [without_projection(v) for v in chunk]
    if isinstance(chunk, tuple) and not hasattr(chunk, "_fields"):
        return tuple(without_projection(v) for v in chunk)
    return chunk


class ContextPlaneMiddleware(AgentMiddleware[ContextPlaneState, Any]):
    """Projects contextplane's context into every model call of a LangChain v1 agent.

    Args:
        host: the plugin host with the context and prompt sections (default: ``get_host``).
        config: configuration (default: the host's).
        knowledge_store, skills_index: put on every turn's ``ProjectionRequest``.
        backend: where the turn's records go (a ``contextplane.records.Backend``: injection
            log, prompt snapshots, trajectory). Default: the backend ``knowledge_store``
            belongs to, if any; with neither, composition reads ``backend.memories``.
        stable_prefix: a ``StablePrefix``, ``True`` to build one from the host now (with
            ``tools`` as the bound tool names), or ``None`` to leave the system message to
            ``create_agent(system_prompt=...)``. The prefix is delivered as the system
            message only when the agent has none of its own.
        incognito, goal_turn: a bool, or ``f(state, runtime) -> bool``; a bool is
            overridden per run by ``runtime.context`` carrying the same key or attribute.
        session_id: a fixed id, or ``f(runtime) -> str``; default the LangGraph thread id.
        working_state: ``f(state, runtime) -> mapping`` handed to sections as ``state``;
            default the agent state minus messages and agent machinery.
        subagent: a ``SubagentContract``: the system message is its prompt verbatim, and the
            projection holds only the sections it opted into (none by default).
        cache_control: breakpoints to place (e.g. ``{"type": "ephemeral"}``); a
            ``cache_control`` found in ``request.model_settings`` (put there by an outer
            ``AnthropicPromptCachingMiddleware``) is used and removed from the settings.
    """

    state_schema = ContextPlaneState

    def __init__(
        self,
        *,
        host: PluginHost | None = None,
        config: Config | None = None,
        knowledge_store: Any = None,
        skills_index: Sequence[Any] | None = None,
        stable_prefix: StablePrefix | bool | None = None,
        tools: Sequence[str] = (),
        backend: Any = None,
        incognito: Flag = False,
        goal_turn: Flag = False,
        session_id: str | Callable[[Any], str] | None = None,
        working_state: Callable[[Mapping[str, Any], Any], Mapping[str, Any]] | None = None,
        budget_tokens: int | None = None,
        context_window: int | None = None,
        project: str | None = None,
        cache_control: Mapping[str, Any] | None = None,
        subagent: SubagentContract | None = None,
    ) -> None:
        super().__init__()
        self.host = host if host is not None else get_host(config)
        self.config = config if config is not None else self.host.config
        self.knowledge_store = knowledge_store
        self.skills_index = skills_index
        self.backend = backend
        #: The wiring every turn of this middleware shares (store and backend resolved once).
        self.runtime = ContextRuntime(
            host=self.host,
            config=self.config,
            backend=backend,
            knowledge_store=knowledge_store,
            skills_index=skills_index,
        )
        if stable_prefix is True:
            stable_prefix = build_stable_prefix(
                self.host, BuildContext(config=self.config, tools=tuple(tools))
            )
        self.stable_prefix: StablePrefix | None = (
            stable_prefix if isinstance(stable_prefix, StablePrefix) else None
        )
        self.subagent = subagent
        # Built once: the prefix is process-lifetime (ADR D1), so is its message.
        self._prefix: StablePrefix | str | None = self.stable_prefix
        if subagent is not None:
            if self.stable_prefix is not None:
                raise ValueError(
                    "a subagent's system prompt is its own prompt; do not also pass stable_prefix"
                )
            self._prefix = build_subagent_prompt(subagent)
        text = self._prefix.text if isinstance(self._prefix, StablePrefix) else self._prefix
        self._system_message = SystemMessage(content=text) if text else None
        self.incognito = incognito
        self.goal_turn = goal_turn
        self.session_id = session_id
        self.working_state = working_state
        self.budget_tokens = budget_tokens
        self.context_window = context_window
        self.project = project
        self.cache_control = dict(cache_control) if cache_control else None
        self._warned_system = False

    # --- composition ---------------------------------------------------------------------

    def _session(self, runtime: Any) -> str:
        if callable(self.session_id):
            return str(self.session_id(runtime))
        if self.session_id is not None:
            return self.session_id
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None) if info is not None else None
        return str(thread) if thread else ""

    def _state_for_sections(self, state: Mapping[str, Any], runtime: Any) -> Mapping[str, Any]:
        if self.working_state is not None:
            return self.working_state(state, runtime)
        return {k: v for k, v in state.items() if k not in _NOT_WORKING_STATE}

    def projection_request(self, state: Mapping[str, Any], runtime: Any, *, reason: str) -> ProjectionRequest:
        """This turn's ``ProjectionRequest``: the query is the newest operator input, the
        session the thread, the flags from ``incognito`` / ``goal_turn`` (or the run's context)."""
        messages: list[BaseMessage] = list(state.get("messages") or ())
        turn_index, _calls, query = turn_position(messages)
        return self.runtime.request(
            query,
            state=self._state_for_sections(state, runtime),
            session_id=self._session(runtime),
            turn_index=turn_index,
            project=self.project,
            surface=Surface.NATIVE,
            incognito=_flag(self.incognito, "incognito", state, runtime),
            goal_turn=_flag(self.goal_turn, "goal_turn", state, runtime),
            budget_tokens=self.budget_tokens,
            context_window=self.context_window,
            record=True,
            extra={"reason": reason},
        )

    def _subagent_request(self, request: ProjectionRequest) -> ProjectionRequest | None:
        """The subagent's request, or None when its contract asks for no projection (the
        default): nothing is then composed or recorded."""
        contract = self.subagent
        if contract is None:
            return request
        if not contract.projects:
            return None
        names = [r.section.name for r in self.host.context_sections()]
        check_contract(contract, names, source=request.config.source)
        return subagent_request(contract, request)

    def compose(self, state: Mapping[str, Any], runtime: Any, *, reason: str) -> ProjectionCarrier:
        """Compose this turn's projection from the agent state. The records observer writes
        its injection-log row and trajectory entry (never for incognito)."""
        request = self.projection_request(state, runtime, reason=reason)
        wanted = self._subagent_request(request)
        turn = self.runtime.compose(wanted) if wanted is not None else None
        return self._carrier(request, turn, reason)

    async def acompose(self, state: Mapping[str, Any], runtime: Any, *, reason: str) -> ProjectionCarrier:
        """``compose`` on the async path (``Runtime.acompose``): the same projection, with the
        event loop free while sections read and the records are written."""
        request = self.projection_request(state, runtime, reason=reason)
        wanted = self._subagent_request(request)
        turn = await self.runtime.acompose(wanted) if wanted is not None else None
        return self._carrier(request, turn, reason)

    @staticmethod
    def _carrier(request: ProjectionRequest, turn: Turn | None, reason: str) -> ProjectionCarrier:
        if turn is None:
            # The default subagent contract: nothing is projected, composed or recorded. The
            # empty projection carries no request, so delivery notifies no observer either.
            projection = ProjectedContext(
                text="",
                sections=(),
                overflow=(),
                budget_chars=None,
                used_chars=0,
                injection=None,
                session_id=request.session_id,
                turn_index=request.turn_index,
                incognito=request.incognito,
                goal_turn=request.goal_turn,
                surface=Surface.SUBAGENT,
            )
            turn = Turn(projection, TurnState(None))
        projection = turn.projection
        message = projection_message(projection.text, projection.turn_index) if projection.text else None
        return ProjectionCarrier(projection, message, request.query, reason, turn)

    def before_agent(self, state: ContextPlaneState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {PROJECTION_KEY: self.compose(state, runtime, reason="turn")}

    async def abefore_agent(self, state: ContextPlaneState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {PROJECTION_KEY: await self.acompose(state, runtime, reason="turn")}

    def before_model(self, state: ContextPlaneState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if state.get(PROJECTION_KEY) is not None:
            return None
        # A resume (Command(resume=...)) does not re-run before_agent, and the untracked
        # channel starts empty: recompose once for this run.
        return {PROJECTION_KEY: self.compose(state, runtime, reason="resume")}

    async def abefore_model(self, state: ContextPlaneState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if state.get(PROJECTION_KEY) is not None:
            return None
        return {PROJECTION_KEY: await self.acompose(state, runtime, reason="resume")}

    # --- delivery ------------------------------------------------------------------------

    def _prepare(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        carrier = request.state.get(PROJECTION_KEY)
        if not isinstance(carrier, ProjectionCarrier):
            # Only reachable if the graph skipped both hooks (e.g. a hand-built graph).
            carrier = self.compose(request.state, request.runtime, reason="model_call")
        system, prefix, history, call_index = self._call_of(request)
        delivered = self.runtime.deliver(carrier.turn, history, carrier, call_index=call_index, prefix=prefix)
        return self._override(request, carrier, system, delivered.messages)

    async def _aprepare(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        carrier = request.state.get(PROJECTION_KEY)
        if not isinstance(carrier, ProjectionCarrier):
            carrier = await self.acompose(request.state, request.runtime, reason="model_call")
        system, prefix, history, call_index = self._call_of(request)
        delivered = await self.runtime.adeliver(
            carrier.turn, history, carrier, call_index=call_index, prefix=prefix
        )
        return self._override(request, carrier, system, delivered.messages)

    def _call_of(
        self, request: ModelRequest[Any]
    ) -> tuple[SystemMessage | None, StablePrefix | str | None, Sequence[BaseMessage], int]:
        """The system message the model sees, the prefix observers are told of, the history and
        the call's index in the turn."""
        system = request.system_message
        prefix: StablePrefix | str | None
        if system is None and self._system_message is not None:
            system = self._system_message
            prefix = self._prefix
        else:
            if system is not None and self._system_message is not None and not self._warned_system:
                self._warned_system = True
                warnings.warn(
                    "ContextPlaneMiddleware was given a stable prefix, but the agent has its own "
                    "system_prompt; the agent's system prompt is used. Pass the prefix to "
                    "create_agent(system_prompt=prefix.text) or drop one of them.",
                    stacklevel=2,
                )
            prefix = system.text if system is not None else None

        history: Sequence[BaseMessage] = request.messages
        _turn, call_index, _query = turn_position(history)
        return system, prefix, history, call_index

    def _override(
        self,
        request: ModelRequest[Any],
        carrier: ProjectionCarrier,
        system: SystemMessage | None,
        messages: list[BaseMessage],
    ) -> ModelRequest[Any]:
        """The model request with the delivered messages, the prefix and the cache breakpoints."""
        settings = request.model_settings
        cache_control = settings.get("cache_control") or self.cache_control
        overrides: dict[str, Any] = {}
        if cache_control:
            # Breakpoints on the prefix and the last history block, never on the projection.
            split = len(messages) - 1 if carrier.projection.text else len(messages)
            system, marked = place_breakpoints(system, messages[:split], cache_control)
            messages = [*marked, *messages[split:]]
            if "cache_control" in settings:
                overrides["model_settings"] = {k: v for k, v in settings.items() if k != "cache_control"}
        if system is not request.system_message:
            overrides["system_message"] = system
        return request.override(messages=cast("list[AnyMessage]", messages), **overrides)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelCallResult[Any]:
        return handler(self._prepare(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        return await handler(await self._aprepare(request))


__all__ = [
    "PROJECTION_KEY",
    "ContextPlaneMiddleware",
    "ContextPlaneState",
    "ProjectionCarrier",
    "without_projection",
]
