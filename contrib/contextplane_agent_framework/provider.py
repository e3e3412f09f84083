"""``ContextPlaneProvider``: compose once per run, deliver per model call, never persist (ADR D2).

Agent Framework hands a context provider the run, not its model calls: ``before_run`` sees the
run's input once, and whatever it adds to the ``SessionContext`` is sent with every model call
of the run (the function-invocation loop reuses the run's message list). So the provider:

1. in ``before_run`` builds the turn's ``ProjectionRequest`` (the query is the run's input, the
   session the ``AgentSession``, the turn index a counter in the provider's session state; a
   run that only answers a tool-approval request resumes the turn) and composes it once
   (``Runtime.acompose``; the records observer writes the injection-log row and the
   trajectory entry). It extends the run's instructions with the stable prefix and its
   context messages with the projection, attributed to ``source_id``: a ``HistoryProvider``
   stores input and response messages, and context messages only when built with
   ``store_context_messages=True`` (default False), so the projection is never stored;
2. adds a per-run chat middleware (``ProjectionDelivery``), the framework's per-call seam: on
   every model call it takes the run's projection out of the call's messages, calls
   ``Runtime.adeliver`` (which strips stale context frames a history provider configured to
   store context may hold, places the projection last, after the history and any tool
   results, and records the call's snapshot) and sends the result. Nothing turn-scoped lives
   on the provider: the turn travels on the run's middleware object.

A conversation the service stores (``store`` true, the OpenAI Responses client's default, or
a service-managed session) is refused in ``before_run``: the service would keep every input of
the run, the projection too (``service_stores_conversation``).

Agent Framework runs agents on an event loop only, so only the async path (``acompose``,
``adeliver``) is used. A chat client without a chat-middleware layer (a bare
``BaseChatClient``) still receives the projection from step 1, in the framework's context
position (before the run's input), but no snapshot can be recorded for its calls; the provider
logs that once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agent_framework import (
    AgentSession,
    ChatContext,
    ChatMiddleware,
    ContextProvider,
    HistoryProvider,
    Message,
    SessionContext,
)

from contextplane.authority import StablePrefix
from contextplane.config import Config
from contextplane.errors import ConfigError
from contextplane.plugins import PluginHost, get_host
from contextplane.request import BuildContext, ProjectionRequest, Surface
from contextplane.runtime import Runtime, Turn
from contextplane_agent_framework.messages import RunCodec, is_context_frame, replay_form

logger = logging.getLogger("contextplane.agent_framework")

#: A flag fixed for the provider, or decided per run from the session and the run's context.
Flag = bool | Callable[[AgentSession, SessionContext], bool]

#: Keys of the turn counter and the turn's model-call counter in the provider's session state
#: (the only things it keeps there: no text).
TURN_KEY = "turn_index"
CALLS_KEY = "calls"


def run_query(messages: Sequence[Message]) -> str:
    """The newest operator text: the newest user message with text that is not a context frame
    ("" when there is none: a run that only answers an approval request, say)."""
    for message in reversed(messages):
        if str(message.role) == "user" and message.text and not is_context_frame(message):
            return str(message.text)
    return ""


async def stored_history(agent: Any, session: AgentSession, context: SessionContext) -> list[Message]:
    """The session's history as the agent's first loading history provider keeps it.

    Why: a run that only answers an approval request resumes its turn, queried with the turn's
    operator input, which is in the loaded history; but with
    ``require_per_service_call_history_persistence`` the framework loads history per model
    call, after ``before_run``, so the run's context holds none of it yet."""
    for provider in getattr(agent, "context_providers", None) or ():
        if isinstance(provider, HistoryProvider) and provider.load_messages:
            state = session.state.get(provider.source_id, {})
            return list(await provider.get_messages(context.session_id or session.session_id, state=state))
    return []


def service_stores_conversation(agent: Any, session: AgentSession, context: SessionContext) -> bool:
    """Whether the service keeps this run's conversation: a service-managed session or
    ``conversation_id``, or ``store`` true (the run's, else the agent's default, else the
    client's ``STORES_BY_DEFAULT``: True for ``agent_framework.openai.OpenAIChatClient``, the
    Responses API). The framework reads ``store`` the same way to decide who holds the history.

    Why it matters: such a client sends each run's messages once and chains the responses
    (``previous_response_id``), so the service stores every input item of a run, the
    projection too (ADR D2: never persisted), and the next request carries it again, in the
    middle of the conversation; the projections pile up turn after turn."""
    options, defaults = context.options or {}, getattr(agent, "default_options", None) or {}
    if context.service_session_id or session.service_session_id:
        return True
    if options.get("conversation_id") or defaults.get("conversation_id"):
        return True
    store = options.get("store")
    if store is None:
        store = defaults.get("store")
    if store is None:
        store = getattr(getattr(agent, "client", None), "STORES_BY_DEFAULT", False)
    return bool(store)


class ProjectionDelivery(ChatMiddleware):
    """One run's projection on its way to that run's model calls (made by ``before_run``).

    Counts the turn's calls (the snapshot's ``call_index``) in the provider's session state, so
    a resumed run continues the numbering; ``codec`` reads the run's messages."""

    def __init__(
        self,
        runtime: Runtime,
        turn: Turn,
        codec: RunCodec,
        state: dict[str, Any],
        *,
        inputs: int = 0,
        agent_name: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.turn = turn
        self.codec = codec
        self.state = state
        #: The run's input messages (the first of a call's messages no provider attributed).
        self.inputs = inputs
        #: The name the agent stamps on the run's responses; None: send them as they are.
        self.agent_name = agent_name
        #: Model calls of this run.
        self.calls = 0

    def prefix_seen(self, options: Mapping[str, Any] | None) -> StablePrefix | str | None:
        """What the model sees as its system prompt: the runtime's prefix when the instructions
        are exactly it (the snapshot then names its sections), else the instructions as sent
        (the agent's own instructions come first, the prefix after them)."""
        instructions = (options or {}).get("instructions")
        prefix = self.runtime.prefix
        text = prefix.text if isinstance(prefix, StablePrefix) else prefix
        if text and instructions == text:
            return prefix
        return instructions if isinstance(instructions, str) and instructions else None

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        history = [m for m in context.messages if not self.codec.is_this_run(m)]
        call_index = int(self.state.get(CALLS_KEY, 0))
        self.state[CALLS_KEY] = call_index + 1
        self.calls += 1
        delivered = await self.runtime.adeliver(
            self.turn, history, self.codec, call_index=call_index, prefix=self.prefix_seen(context.options)
        )
        context.messages = self.sent(delivered.messages)  # a new list: the run's own list is untouched
        await call_next()

    def sent(self, messages: list[Message]) -> list[Message]:
        """The call's messages with this run's responses (what follows the run's input among the
        messages no provider attributed) in their replay form (``messages.replay_form``), so a
        tool call is sent the same in its run and on every later turn."""
        if self.agent_name is None:
            return messages
        out: list[Message] = []
        own = 0
        for message in messages:
            if "_attribution" not in (message.additional_properties or {}):
                own += 1
                if own > self.inputs:
                    message = replay_form(message, self.agent_name)
            out.append(message)
        return out


class ContextPlaneProvider(ContextProvider):
    """A context provider that projects contextplane's context into every model call of a run.

    Args:
        runtime: the deployment (``contextplane.runtime.open_runtime(...)``); or leave it out
            and pass ``host`` / ``config`` / ``backend`` / ``knowledge_store`` /
            ``skills_index`` / ``tools`` to wire one here (the prefix built once, on first use,
            with ``tools`` as the bound tool names).
        stable_prefix: extend every run's instructions with the runtime's stable prefix.
        incognito, goal_turn: a bool, or ``f(session, context) -> bool`` decided per run.
        working_state: ``f(session, context) -> mapping`` handed to sections as ``state``.
        source_id: the provider's id (attribution of its messages, its session-state key).
    """

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        host: PluginHost | None = None,
        config: Config | None = None,
        backend: Any = None,
        knowledge_store: Any = None,
        skills_index: Sequence[Any] | None = None,
        tools: Sequence[str] = (),
        stable_prefix: bool = True,
        incognito: Flag = False,
        goal_turn: Flag = False,
        working_state: Callable[[AgentSession, SessionContext], Mapping[str, Any]] | None = None,
        budget_tokens: int | None = None,
        context_window: int | None = None,
        project: str | None = None,
        source_id: str = "contextplane",
    ) -> None:
        super().__init__(source_id)
        wiring = {"host": host, "config": config, "backend": backend, "knowledge_store": knowledge_store,
                  "skills_index": skills_index, "tools": tools or None}
        given = [name for name, value in wiring.items() if value is not None]
        if runtime is not None and given:
            raise ValueError(
                f"ContextPlaneProvider got a runtime and {', '.join(given)}: the runtime already holds "
                f"its wiring; pass open_runtime(..., {given[0]}=...) or leave runtime out"
            )
        if runtime is None:
            host = host if host is not None else get_host(config)
            config = config if config is not None else host.config
            runtime = Runtime(
                host=host,
                config=config,
                backend=backend,
                knowledge_store=knowledge_store,
                skills_index=skills_index,
                build=BuildContext(config=config, tools=tuple(tools)),
            )
        self.runtime = runtime
        self.stable_prefix = stable_prefix
        self.incognito = incognito
        self.goal_turn = goal_turn
        self.working_state = working_state
        self.budget_tokens = budget_tokens
        self.context_window = context_window
        self.project = project
        self._warned_no_calls = False

    def request(
        self,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
        history: Sequence[Message] = (),
    ) -> ProjectionRequest:
        """This run's ``ProjectionRequest``. A run whose input holds operator text opens a turn
        (the counter advances); one without (it answers a tool-approval request) resumes the
        current turn, queried with the newest operator text of the loaded history (or of
        ``history``, the stored one, when the framework loads history per model call)."""
        query = run_query(context.input_messages)
        resumed = not query and TURN_KEY in state
        if resumed:
            turn_index = int(state[TURN_KEY])
            query = run_query(context.get_messages(exclude_sources={self.source_id})) or run_query(history)
        else:
            turn_index = int(state.get(TURN_KEY, -1)) + 1
            state[TURN_KEY], state[CALLS_KEY] = turn_index, 0
        return self.runtime.request(
            query,
            state=self.working_state(session, context) if self.working_state is not None else None,
            session_id=context.session_id or session.session_id,
            turn_index=turn_index,
            project=self.project,
            surface=Surface.NATIVE,
            incognito=_flag(self.incognito, session, context),
            goal_turn=_flag(self.goal_turn, session, context),
            budget_tokens=self.budget_tokens,
            context_window=self.context_window,
            extra={"reason": "resume" if resumed else "turn"},
        )

    async def before_run(
        self, *, agent: Any, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        """Compose the run's turn once; hand it to the run's calls through its middleware.

        Raises ``ConfigError`` (a ``ValueError``; before composing, so nothing is recorded or
        sent) when the service stores the conversation: the projection would be stored with it."""
        if service_stores_conversation(agent, session, context):
            client = type(getattr(agent, "client", None)).__name__
            raise ConfigError(
                f"ContextPlaneProvider: the conversation is stored by the service ({client} with store "
                "unset or true, or a service-managed session), which would persist every turn's "
                "projection; run the agent with default_options={'store': False} and a history provider "
                "(InMemoryHistoryProvider or your own) so the framework keeps the history"
            )
        history: list[Message] = []
        if (
            TURN_KEY in state
            and not run_query(context.input_messages)
            and not run_query(context.get_messages(exclude_sources={self.source_id}))
        ):
            history = await stored_history(agent, session, context)  # a resume, history not loaded
        turn = await self.runtime.acompose(self.request(session, context, state, history))
        projection = turn.projection
        token = f"{projection.session_id}:{projection.turn_index}:{uuid.uuid4().hex}"
        codec = RunCodec(self.source_id, token)
        delivery = ProjectionDelivery(
            self.runtime,
            turn,
            codec,
            state,
            inputs=len(context.input_messages),
            agent_name=agent_name(agent),
        )
        if self.stable_prefix:
            prefix = self.runtime.prefix
            text = prefix.text if isinstance(prefix, StablePrefix) else prefix
            if text:
                context.extend_instructions(self.source_id, text)
        if turn.text:
            context.extend_messages(self.source_id, [codec.wrap(turn.text)])
        context.extend_middleware(self.source_id, delivery)
        context.metadata[self.source_id] = delivery

    async def after_run(
        self, *, agent: Any, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        """Say once when the client ran no chat middleware (no snapshot could be recorded)."""
        delivery = context.metadata.get(self.source_id)
        if (
            isinstance(delivery, ProjectionDelivery)
            and delivery.calls == 0
            and context.response is not None
            and not self._warned_no_calls
        ):
            self._warned_no_calls = True
            logger.warning(
                "the agent's chat client ran no chat middleware, so contextplane recorded no prompt "
                "snapshot for its calls (the projection was still sent, before the run's input); "
                "use a client with ChatMiddlewareLayer (every client the framework ships has it)"
            )


def agent_name(agent: Any) -> str | None:
    """The name an ``Agent`` stamps on its runs' responses (``author_name``), None when the
    agent stamps none or loads history per model call
    (``require_per_service_call_history_persistence``: each call is stored as it returns,
    before any stamp, and replayed so)."""
    if getattr(agent, "require_per_service_call_history_persistence", False):
        return None
    name = getattr(agent, "_get_agent_name", None)
    return str(name()) if callable(name) else None


def _flag(value: Flag, session: AgentSession, context: SessionContext) -> bool:
    return bool(value(session, context)) if callable(value) else bool(value)


__all__ = [
    "CALLS_KEY",
    "TURN_KEY",
    "ContextPlaneProvider",
    "Flag",
    "ProjectionDelivery",
    "agent_name",
    "run_query",
    "service_stores_conversation",
    "stored_history",
]
