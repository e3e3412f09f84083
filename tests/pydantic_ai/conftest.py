"""Fixtures for the PydanticAI capability: a ``FunctionModel`` that keeps every request it was
sent; the marker sections, the embedded backend, the host and the runtime come from
``tests.adapter_helpers`` (shared with the other adapters' tests).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.adapter_helpers import (
    CONFIG,
    MARK,
    MEMORY,
    MEMTEXT,
    WS,
    MarkerSections,
    backend,
    host,
    runtime,
    sections,
    tag,
)

#: The shared fixtures (pytest finds them here) and names the tests import from this module.
__all__ = [
    "CONFIG", "MARK", "MEMORY", "MEMTEXT", "WS", "MarkerSections", "backend", "host", "runtime", "sections", "tag",
]  # fmt: skip


@attrs.define
class Seen:
    """One model request as the model received it."""

    messages: list[ModelMessage]
    instructions: str | None


class Recorder:
    """A ``FunctionModel`` body: keeps each request, then answers by ``policy``."""

    def __init__(
        self, policy: Callable[[list[ModelMessage], AgentInfo], ModelResponse] | None = None
    ) -> None:
        self.seen: list[Seen] = []
        self.policy = policy
        self._lock = threading.Lock()

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        with self._lock:
            self.seen.append(Seen(list(messages), info.instructions))
        if self.policy is not None:
            return self.policy(messages, info)
        return ModelResponse(parts=[TextPart("ok")])

    def model(self) -> FunctionModel:
        return FunctionModel(self)


def tool_then_answer(tool_name: str = "lookup") -> Callable[[list[ModelMessage], AgentInfo], ModelResponse]:
    """Policy: call the tool unless the newest request carries its result; then answer."""

    def policy(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        if any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(tool_name, {"topic": "deploy"}, tool_call_id="call-1")])

    return policy
