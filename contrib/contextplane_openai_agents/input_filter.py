"""``ContextPlaneInputFilter``: the projection for the OpenAI Agents SDK, per model call (ADR D2).

The SDK calls ``RunConfig.call_model_input_filter`` right before every model call of a run
with a copy of the model input (``CallModelData.model_data``: the instructions and the input
items) and sends what the filter returns; it never stores that return value (the ``Session``
and ``RunResult.to_input_list()`` hold the run's own items). So the filter is where the
projection goes in, and nowhere else:

1. On the first call of a turn (the newest user message not seen before) it composes the
   turn once through the ``Runtime`` (``acompose``: the query is that user message, the turn
   index the number of user messages before it, counted in the SDK ``Session``'s whole
   history when the model input may be trimmed); the records observer writes the injection
   row, the trajectory entry and the turn inputs.
2. On every call it delivers (``adeliver``) into a new ``ModelInputData``: the input items as
   they are, the projection appended as one user message after them (after a tool result,
   never between a ``function_call`` and its output), and the stable prefix as the
   instructions when the agent has none of its own; the call's snapshot is recorded.

The filter is async, so no store read or record write blocks the run's event loop;
``Runner.run_sync`` drives the same loop. One filter follows one session's turns in order
(``run_config`` makes one per run). Not for server-managed conversations
(``conversation_id``, ``previous_response_id``): the server keeps what it is sent.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from agents.memory import Session
from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData

from contextplane.request import Surface
from contextplane.runtime import Runtime, Turn
from contextplane.types import StablePrefix
from contextplane_openai_agents.items import ITEMS, calls_so_far, is_user_input, turn_position

#: ``Session.get_items`` reads at most this many items: every one (``None`` means the session's
#: own limit, which is what the trimmed model input already shows).
_ALL_ITEMS = 2**62

#: A flag of the turn: a bool, or ``f(run_context) -> bool``; a bool is overridden by the run
#: context carrying the same key (a mapping) or attribute.
Flag = bool | Callable[[Any], bool]


def _flag(value: Flag, name: str, context: Any) -> bool:
    if callable(value):
        return bool(value(context))
    if isinstance(context, Mapping) and name in context:
        return bool(context[name])
    if context is not None and not isinstance(context, Mapping) and hasattr(context, name):
        return bool(getattr(context, name))
    return bool(value)


class ContextPlaneInputFilter:
    """A ``call_model_input_filter`` that composes once per turn and places the projection in
    each model call's input only. See the module docstring.

    Args:
        runtime: the ``Runtime`` the turns compose and record through (``open_runtime``).
        session_id: the session the records are kept under (the SDK ``Session``'s id, say).
        incognito, goal_turn: a bool, or ``f(run_context) -> bool``; a bool is overridden
            per run by the run context carrying the same key or attribute.
        state: the working state sections read (``request.state``), or ``f(run_context)``
            returning it (the run's context is where an SDK app keeps its state).
        prefix: the instructions the model sees when the agent has none (default: the
            runtime's stable prefix). An agent with instructions of its own keeps them.
        inner: a filter to run first (``ToolOutputTrimmer``, say); the projection is placed
            in what it returns.
        session: the SDK ``Session`` the run keeps its history in, when the model input may
            hold only part of it (``SessionSettings(limit=...)``, a ``session_input_callback``):
            turns are then numbered from the session's whole history, read once per turn, so a
            trimmed input never gives two turns one index (their snapshots would collide).
            ``run_config`` passes it when the session or the run config trims.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        session_id: str = "",
        incognito: Flag = False,
        goal_turn: Flag = False,
        state: Mapping[str, Any] | Callable[[Any], Mapping[str, Any]] | None = None,
        budget_tokens: int | None = None,
        context_window: int | None = None,
        project: str | None = None,
        prefix: StablePrefix | str | None = None,
        inner: CallModelInputFilter | None = None,
        session: Session | None = None,
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.incognito = incognito
        self.goal_turn = goal_turn
        self.state = state
        self.budget_tokens = budget_tokens
        self.context_window = context_window
        self.project = project
        self._prefix = prefix
        self.inner = inner
        self.session = session
        #: The turn being delivered: its (turn index, query), the composed turn, calls so far.
        self._current: tuple[tuple[int, str], Turn] | None = None
        self._calls = 0
        self.compositions = 0
        self._warned_instructions = False

    @property
    def turn(self) -> Turn | None:
        """The turn this filter is delivering (the last one composed), or None before any."""
        return self._current[1] if self._current is not None else None

    @property
    def prefix(self) -> StablePrefix | str | None:
        return self._prefix if self._prefix is not None else self.runtime.prefix

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        if self.inner is not None:
            got = self.inner(data)
            model_data = await got if inspect.isawaitable(got) else got
        items = list(model_data.input)
        turn = await self._turn(items, data.context)
        instructions, prefix = self._instructions(model_data.instructions)
        call_index, self._calls = self._calls, self._calls + 1
        delivered = await self.runtime.adeliver(turn, items, ITEMS, call_index=call_index, prefix=prefix)
        return ModelInputData(input=delivered.messages, instructions=instructions)

    async def _turn(self, items: list[Any], context: Any) -> Turn:
        """The turn of this call: composed on the turn's first call, then reused."""
        position = turn_position(items)
        current = self._current
        if current is not None and current[0] == position:
            return current[1]
        turn_index, query = position
        if self.session is not None:
            # The SDK has saved the turn's input to the session before its first model call.
            history = await self.session.get_items(limit=_ALL_ITEMS)
            turn_index = max(sum(1 for i in history if is_user_input(i)) - 1, 0)
        # A turn this filter meets after its first model call is a resumed run (a ``RunState``
        # after an approval): composed again, once, and its calls numbered on from the input.
        earlier = calls_so_far(items)
        request = self.runtime.request(
            query,
            session_id=self.session_id,
            turn_index=turn_index,
            state=self.state(context) if callable(self.state) else self.state,
            surface=Surface.NATIVE,
            incognito=_flag(self.incognito, "incognito", context),
            goal_turn=_flag(self.goal_turn, "goal_turn", context),
            budget_tokens=self.budget_tokens,
            context_window=self.context_window,
            project=self.project,
            extra={"reason": "resume" if earlier else "turn"},
        )
        turn = await self.runtime.acompose(request)
        self._current, self._calls = (position, turn), earlier
        self.compositions += 1
        return turn

    def _instructions(self, own: str | None) -> tuple[str | None, StablePrefix | str | None]:
        """(what the model sees as instructions, the prefix the snapshot records)."""
        prefix = self.prefix
        if not own:
            text = prefix.text if isinstance(prefix, StablePrefix) else prefix
            return text, prefix
        if prefix is not None and not self._warned_instructions:
            self._warned_instructions = True
            warnings.warn(
                "the agent has instructions of its own, so they are sent instead of contextplane's "
                "stable prefix; build the agent with instructions=None (or instructions=prefix.text) "
                "to send the prefix",
                stacklevel=2,
            )
        return own, own


__all__ = ["ContextPlaneInputFilter", "Flag"]
