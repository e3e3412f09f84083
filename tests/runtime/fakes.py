"""A scripted chat model that records exactly what each call received.

``GenericFakeChatModel`` cannot bind tools, and a real agent binds them, so the runtime tests
use this: each call pops the next reply from a script chosen by the thread's latest operator
input, so concurrent threads get their own replies whatever order the calls interleave in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

Reply = Callable[[list[BaseMessage]], AIMessage]


def say(text: str) -> Reply:
    return lambda _msgs: AIMessage(text)


def call_tool(name: str, args: dict[str, Any] | None = None, call_id: str = "call-1") -> Reply:
    return lambda _msgs: AIMessage("", tool_calls=[{"name": name, "args": args or {}, "id": call_id}])


class RecordingChatModel(BaseChatModel):
    """Replies by a policy function; keeps every list of messages it was called with."""

    policy: Any = None  # Callable[[list[BaseMessage]], AIMessage]
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _kwargs: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "recording-fake"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        with self._lock:
            return list(self._calls)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingChatModel:  # type: ignore[override]
        return self

    @property
    def call_kwargs(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._kwargs)

    def _reply(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> ChatResult:
        with self._lock:
            self._calls.append(list(messages))
            self._kwargs.append(dict(kwargs))
        message = self.policy(list(messages)) if self.policy is not None else AIMessage("ok")
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages, kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages, kwargs)
