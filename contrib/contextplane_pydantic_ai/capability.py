"""``ContextPlaneCapability``: a PydanticAI capability that projects per turn and never persists (ADR D2).

One agent run is one turn. The capability is a thin layer over a
``contextplane.runtime.Runtime`` (``open_runtime``), in PydanticAI's own seams:

- ``get_instructions`` returns the stable prefix as literal instruction text. PydanticAI sends
  instructions from the agent's configuration on every request (``ModelRequestParameters.
  instruction_parts``) and never re-sends them from the stored history; a literal part sorts
  first among the instruction parts (``InstructionPart.sorted``), so the prefix heads the prompt
  byte for byte from turn to turn (ADR D1: built once per runtime).
- ``for_run`` gives every run its own copy, so the turn composed for one run is never seen by a
  concurrent one: nothing turn-scoped lives on the instance the agent holds.
- ``before_model_request`` composes the turn once, on the run's first model request
  (``Runtime.acompose``: the user prompt of the run is the query; the records observer writes
  the injection-log row, the turn inputs and the trajectory entry), then on every model request
  of the run delivers it (``Runtime.adeliver``: the call's snapshot) and hands PydanticAI a *new*
  message list, the history then the projection as one marked ``ModelRequest``. Assigning the
  list (never appending to it) is request-only in PydanticAI: ``ctx.messages`` and
  ``result.all_messages()`` never hold the projection. ``history_processors`` are not used:
  they write ``ctx.messages`` back.
- ``get_ordering`` places the capability inside every ``ProcessHistory`` (what
  ``history_processors`` become): their ``before_model_request`` runs first and writes the
  history back, then the projection is added after it, for this request only. Our section
  order itself lives inside the one prefix and the one projection, which PydanticAI sees as one
  instruction part and one message.
- Prompt caching of the conversation (``Caching()``, ``anthropic_cache``) is taken over so the
  last cache breakpoint falls before the projection, never on it (``caching``).

``agent.run``, ``agent.run_sync`` and ``agent.run_stream`` go through these (async) hooks;
the store reads and record writes of ``acompose``/``adeliver`` run off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext

from contextplane.authority import StablePrefix
from contextplane.request import ProjectionRequest, Surface
from contextplane.runtime import Runtime, Turn
from contextplane_pydantic_ai.caching import breakpoint_before_projection
from contextplane_pydantic_ai.codec import CODEC, ProjectionPart, is_projection, projection_request, separated

#: A flag given as a bool, or read from the run: ``f(ctx) -> bool``.
Flag = bool | Callable[[RunContext[Any]], bool]

_MISSING = object()


def from_deps(deps: Any, name: str) -> Any:
    """``deps[name]`` for a mapping, ``deps.name`` otherwise; ``_MISSING`` when absent."""
    if isinstance(deps, Mapping):
        return deps.get(name, _MISSING)
    return getattr(deps, name, _MISSING)


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if prompt is None:
        return ""
    return "\n".join(p for p in prompt if isinstance(p, str))


def is_user_turn(message: ModelMessage) -> bool:
    """True for a request that carries an operator's prompt (what opens a turn)."""
    return (
        isinstance(message, ModelRequest)
        and not is_projection(message)
        and any(isinstance(p, UserPromptPart) and not isinstance(p, ProjectionPart) for p in message.parts)
    )


def user_turns(messages: list[ModelMessage]) -> list[ModelRequest]:
    """The requests of ``messages`` that carry an operator's prompt (one per turn)."""
    return [m for m in messages if isinstance(m, ModelRequest) and is_user_turn(m)]


def call_position(messages: list[ModelMessage]) -> int:
    """The index in its turn of the model call ``messages`` are sent to: the model responses
    since the newest operator prompt. Read from the history, not counted per run, so a run that
    resumes a turn (deferred tool results, no new prompt) carries on its numbering and never
    overwrites the snapshots of the turn's earlier calls."""
    responses = 0
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            responses += 1
        elif is_user_turn(message):
            break
    return responses


def newest_prompt(messages: list[ModelMessage]) -> str:
    """The text of the newest operator prompt in ``messages`` ("" when there is none)."""
    turns = user_turns(messages)
    if not turns:
        return ""
    parts = [
        p for p in turns[-1].parts if isinstance(p, UserPromptPart) and not isinstance(p, ProjectionPart)
    ]
    return _prompt_text(parts[-1].content)


@dataclass
class ContextPlaneCapability(AbstractCapability[Any]):
    """Projects contextplane's context into every model request of a PydanticAI agent.

    Args:
        runtime: the deployment (``contextplane.runtime.open_runtime(...)``); its stable prefix
            becomes the agent's instructions and its backend receives the records.
        session_id: a fixed id, or ``f(ctx) -> str``; default ``deps.session_id`` (attribute or
            key) when the run's deps carry one, else the run's ``conversation_id``.
        turn_index: a fixed index, or ``f(ctx) -> int``; default ``deps.turn_index``, else the
            number of operator prompts in the history before this run's.
        incognito, goal_turn: a bool or ``f(ctx) -> bool``; a bool is overridden per run by
            deps carrying the same name.
        working_state: ``f(ctx) -> mapping`` handed to sections as ``state``; default
            ``deps.working_state``, else empty.
        instructions: deliver the runtime's stable prefix as the agent's instructions.
        budget_tokens, context_window, project: put on every turn's request.
    """

    runtime: Runtime
    _: KW_ONLY
    session_id: str | Callable[[RunContext[Any]], str] | None = None
    turn_index: int | Callable[[RunContext[Any]], int] | None = None
    incognito: Flag = False
    goal_turn: Flag = False
    working_state: Callable[[RunContext[Any]], Mapping[str, Any]] | None = None
    instructions: bool = True
    budget_tokens: int | None = None
    context_window: int | None = None
    project: str | None = None
    #: This run's turn, composed on its first model request (per-run copies only: ``for_run``).
    _turn: Turn | None = field(default=None, init=False, repr=False, compare=False)

    # --- configuration PydanticAI reads once -----------------------------------------------

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # takes a Runtime: not spec-serializable

    def get_instructions(self) -> str | None:
        """The stable prefix, as literal text (built once by the runtime)."""
        if not self.instructions:
            return None
        prefix = self.runtime.prefix
        text = prefix.text if isinstance(prefix, StablePrefix) else prefix
        return text or None

    def get_ordering(self) -> CapabilityOrdering:
        """Inside every ``ProcessHistory``: history processors write ``ctx.messages`` back, so
        they must run before the projection is added to the request."""
        return CapabilityOrdering(wrapped_by=(ProcessHistory,))

    async def for_run(self, ctx: RunContext[Any]) -> ContextPlaneCapability:
        """A copy per run: the run's turn lives on it, never on the agent's."""
        return replace(self)

    # --- the turn --------------------------------------------------------------------------

    def request_of(self, ctx: RunContext[Any]) -> ProjectionRequest:
        """The run's ``ProjectionRequest``: the query is the run's user prompt (else the newest
        operator prompt in its history: a run resuming a turn, ``reason`` "resume"), session,
        turn and flags as the class doc says."""
        messages = list(ctx.messages)
        prompt = _prompt_text(ctx.prompt)
        query = prompt or newest_prompt(messages)
        return self.runtime.request(
            query,
            session_id=self._session(ctx),
            turn_index=self._turn_index(ctx, messages),
            state=self._state(ctx),
            surface=Surface.NATIVE,
            incognito=self._flag(self.incognito, "incognito", ctx),
            goal_turn=self._flag(self.goal_turn, "goal_turn", ctx),
            budget_tokens=self.budget_tokens,
            context_window=self.context_window,
            project=self.project,
            extra={"reason": "turn" if prompt else "resume"},
        )

    def _session(self, ctx: RunContext[Any]) -> str:
        if callable(self.session_id):
            return str(self.session_id(ctx))
        if self.session_id is not None:
            return self.session_id
        found = from_deps(ctx.deps, "session_id")
        if found is not _MISSING and found is not None:
            return str(found)
        return ctx.conversation_id or ""

    def _turn_index(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> int:
        if callable(self.turn_index):
            return int(self.turn_index(ctx))
        if self.turn_index is not None:
            return self.turn_index
        found = from_deps(ctx.deps, "turn_index")
        if found is not _MISSING and found is not None:
            return int(found)
        # The run's own request is in the history by its first model request.
        return max(len(user_turns(messages)) - 1, 0)

    def _state(self, ctx: RunContext[Any]) -> Mapping[str, Any]:
        if self.working_state is not None:
            return self.working_state(ctx)
        found = from_deps(ctx.deps, "working_state")
        return found if isinstance(found, Mapping) else {}

    @staticmethod
    def _flag(value: Flag, name: str, ctx: RunContext[Any]) -> bool:
        if callable(value):
            return bool(value(ctx))
        found = from_deps(ctx.deps, name)
        return bool(value) if found is _MISSING or found is None else bool(found)

    # --- each model request ----------------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Compose once per run, then place the projection after the history for this request
        only: a new list is assigned, nothing is appended to the one PydanticAI mirrors."""
        history = separated(request_context.messages)
        if not history or not isinstance(history[-1], ModelRequest):
            # A provider-suspended response being resumed: the request re-sends the history as
            # it was, ending in that response, so there is nowhere to put a projection.
            return request_context
        turn = self._turn
        if turn is None:
            turn = self._turn = await self.runtime.acompose(self.request_of(ctx))
        call_index = call_position(history)
        # The snapshot's prefix is the one this capability delivered (none with instructions off).
        prefix = self.runtime.prefix if self.instructions else None
        delivered = await self.runtime.adeliver(turn, history, CODEC, call_index=call_index, prefix=prefix)
        messages = delivered.messages
        settings, cache_point = breakpoint_before_projection(request_context.model_settings)
        if cache_point is None or not messages or not is_projection(messages[-1]):
            return replace(request_context, messages=messages)
        # Conversation caching asked for: the breakpoint goes before the projection (``caching``).
        messages = [*messages[:-1], projection_request(turn.text, cache_point)]
        return replace(request_context, messages=messages, model_settings=settings)


__all__ = [
    "ContextPlaneCapability",
    "Flag",
    "call_position",
    "from_deps",
    "is_user_turn",
    "newest_prompt",
    "user_turns",
]
