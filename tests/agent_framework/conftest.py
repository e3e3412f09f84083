"""Fixtures for the Agent Framework adapter: a fake chat client built from the framework's own
layers (function invocation and chat middleware over ``BaseChatClient``), so an ``Agent`` runs
its real loop with canned responses and no network. The marker sections (here with the
prior-sessions digest), the embedded backend and the host come from ``tests.adapter_helpers``
(shared with the other adapters' tests).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import attrs
import pytest
from agent_framework import (
    AgentSession,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
    tool,
)

from tests.adapter_helpers import MARK, MEMTEXT, BrokenSection, MarkerSections, backend, host, make_host

#: The shared fixtures (pytest finds them here) and names the tests import from this module.
__all__ = ["MARK", "MEMTEXT", "BrokenSection", "MarkerSections", "backend", "host", "make_host", "sections"]


@pytest.fixture
def sections() -> MarkerSections:
    """The shared marker sections with the prior-sessions digest (goal turns suppress it)."""
    return MarkerSections(digest=True)


@attrs.define
class Seen:
    """One model call as the client received it."""

    messages: list[Message]
    instructions: Any

    def texts(self) -> list[str]:
        return [m.text or "" for m in self.messages]


Policy = Callable[[Sequence[Message]], ChatResponse]


def text_reply(text: str = "ok") -> Policy:
    return lambda _messages: ChatResponse(messages=[Message(role="assistant", contents=[text])])


def lookup_then_answer(messages: Sequence[Message]) -> ChatResponse:
    """Calls ``lookup`` once per run (no tool result after the newest operator input yet), then
    answers with the tool's result. The projection is not operator input (it is marked)."""
    inputs = [
        i for i, m in enumerate(messages)
        if str(m.role) == "user" and "contextplane_projection" not in (m.additional_properties or {})
    ]
    after = messages[inputs[-1] + 1 :] if inputs else messages
    results = [c for m in after for c in m.contents if c.type == "function_result"]
    if not results:
        call = Content.from_function_call(call_id=f"call-{len(messages)}", name="lookup", arguments={"city": "Oslo"})
        return ChatResponse(messages=[Message(role="assistant", contents=[call])])
    return ChatResponse(messages=[Message(role="assistant", contents=[f"answer: {results[-1].result}"])])


class FakeChatClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
    """The framework's own client layers over a canned policy; records every call."""

    def __init__(self, policy: Policy, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.seen: list[Seen] = []

    async def _respond(self, messages: Sequence[Message], options: Any) -> ChatResponse:
        self.seen.append(Seen(list(messages), dict(options).get("instructions")))
        return self.policy(messages)

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any) -> Any:
        if not stream:
            return self._respond(messages, options)

        async def updates() -> AsyncIterator[ChatResponseUpdate]:
            # One update per message of the canned response, as a provider streams them.
            for message in (await self._respond(messages, options)).messages:
                yield ChatResponseUpdate(role=message.role, contents=list(message.contents))

        return ResponseStream(updates(), finalizer=ChatResponse.from_updates)


@tool
def lookup(city: str) -> str:
    """Look the weather in a city up."""
    return f"sunny in {city}"


def stored_json(session: AgentSession) -> str:
    """Everything the framework keeps for the session, as a session store would write it."""
    return json.dumps(session.to_dict(), default=repr)
