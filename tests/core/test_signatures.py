"""Each sync/async pair of the public face is one body with two faces (issue 25, item 2): the
parameters are written once, so the two cannot drift, and both keep the documented signature."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from contextplane import acompose_projected_context, adeliver, compose_projected_context, deliver
from contextplane.signatures import awaiting, parameters_of, same_as
from contextplane.types import ProjectedContext

#: The ADR D8 signature (the parameters and their defaults), as documented.
D8 = {
    "query": inspect.Parameter.empty, "knowledge_store": None, "skills_index": None, "state": None,
    "incognito": False, "goal_turn": False, "budget_tokens": None, "record": True, "session_id": "",
    "turn_index": 0, "project": None, "only_sections": None, "context_window": None, "backend": None,
    "host": None, "config": None, "strict": None, "extra": None,
}  # fmt: skip


def _defaults(function: Any) -> dict[str, Any]:
    return {n: p.default for n, p in inspect.signature(function).parameters.items() if n != "surface"}


def test_the_d8_faces_keep_the_documented_signature() -> None:
    assert _defaults(compose_projected_context) == _defaults(acompose_projected_context) == D8
    assert inspect.iscoroutinefunction(acompose_projected_context)
    assert inspect.signature(compose_projected_context).return_annotation is ProjectedContext


def test_deliver_and_adeliver_take_the_same_parameters() -> None:
    sync, loop = inspect.signature(deliver), inspect.signature(adeliver)
    assert sync.parameters == loop.parameters
    assert list(sync.parameters) == [
        "projection", "history", "prefix", "call_index", "wrap", "is_frame", "text_of", "role_of", "host",
    ]  # fmt: skip
    assert inspect.iscoroutinefunction(adeliver) and not inspect.iscoroutinefunction(deliver)


def _source(a: int, *, b: str = "x") -> list[str]:
    return [b] * a


def test_a_face_takes_its_sources_parameters_and_says_what_it_returns() -> None:
    @same_as(_source)
    def sync(*args: Any, **kwargs: Any) -> Any:
        return _source(*args, **kwargs)

    @awaiting(_source)
    async def loop(*args: Any, **kwargs: Any) -> Any:
        return _source(*args, **kwargs)

    @parameters_of(_source)
    def counted(*args: Any, **kwargs: Any) -> int:
        return len(_source(*args, **kwargs))

    for face in (sync, loop, counted):
        assert list(inspect.signature(face).parameters) == ["a", "b"]
    assert inspect.signature(sync).return_annotation == inspect.signature(loop).return_annotation == list[str]
    assert inspect.signature(counted).return_annotation is int
    assert sync(2, b="y") == ["y", "y"] and counted(3) == 3
    with pytest.raises(TypeError):
        sync(1, c=2)


def test_prompt_recorder_capture_takes_the_recorders_snapshot_keywords() -> None:
    from contextplane.observability.snapshots import PromptRecorder
    from contextplane.recorder import Recorder

    capture = list(inspect.signature(PromptRecorder.capture).parameters.values())
    row = list(inspect.signature(Recorder.snapshot_row, eval_str=True).parameters.values())
    assert capture[1:] == row[1:] and capture[0].name == "self"


def test_the_runtimes_deliver_and_adeliver_take_one_set_of_parameters() -> None:
    """``Runtime.deliver``/``adeliver`` are faces of ``Runtime._call``: the parameters written
    once, shown on both (``help()``, ``inspect``), and an unknown keyword refused by both."""
    import asyncio

    from contextplane.backends.memory import InMemoryBackend
    from contextplane.runtime import Runtime

    sync, loop = inspect.signature(Runtime.deliver), inspect.signature(Runtime.adeliver)
    assert sync.parameters == loop.parameters
    assert list(sync.parameters) == ["self", "turn", "history", "codec", "call_index", "prefix"]
    assert sync.parameters["call_index"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sync.return_annotation == loop.return_annotation
    assert inspect.iscoroutinefunction(Runtime.adeliver) and not inspect.iscoroutinefunction(Runtime.deliver)
    runtime = Runtime(backend=InMemoryBackend(), prefix="P")
    turn = runtime.compose(runtime.request("q", session_id="s"))
    history = [{"role": "user", "content": "hi"}]
    assert runtime.deliver(turn, history, call_index=0).messages == asyncio.run(
        runtime.adeliver(turn, history, call_index=1)
    ).messages
    with pytest.raises(TypeError):
        runtime.deliver(turn, history, call_index=2, codex=None)
    with pytest.raises(TypeError):
        asyncio.run(runtime.adeliver(turn, history, call_index=2, codex=None))
