"""The memory tools and the assembler are written once (issue 25, item 2): the blocking and the
coroutine tools run one plan each, so they share their name, description and parameters (what a
tool runner or an MCP client builds its schema from) and give the same answers; the assembler's
``assemble`` and ``aassemble`` take one parameter list."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from mcp import Client

from contextplane import IncognitoWriteError
from contextplane.testing.memory import InMemoryKnowledgeStore
from contextplane_external import (
    ContextAssembler,
    amemory_ingest,
    amemory_recall,
    bind_async_memory_tools,
    bind_memory_tools,
    memory_ingest,
    memory_recall,
)
from contextplane_external.mcp_server import build_mcp_server


def _face(tool: Any) -> tuple[Any, ...]:
    return tool.__name__, tool.__doc__, inspect.signature(tool), inspect.get_annotations(tool)


def test_the_blocking_and_the_coroutine_tools_are_one_tool() -> None:
    store = InMemoryKnowledgeStore()
    blocking = bind_memory_tools(store, source_type="operator")
    awaited = bind_async_memory_tools(store, source_type="operator")
    for sync, loop in zip(blocking, awaited, strict=True):
        assert _face(sync) == _face(loop) and inspect.iscoroutinefunction(loop)
    recall, ingest = blocking
    assert list(inspect.signature(recall).parameters) == ["query", "k", "include_superseded"]
    assert inspect.signature(ingest).parameters["expires_in_days"].annotation == int | None
    assert inspect.signature(ingest).return_annotation == dict[str, Any]
    assert inspect.signature(bind_memory_tools) == inspect.signature(bind_async_memory_tools).replace(
        return_annotation=inspect.signature(bind_memory_tools).return_annotation
    )

    wrote = ingest("the deploy window is Friday", subject="deploy")
    wrote_async = asyncio.run(awaited[1]("kiwi harvest starts in May"))
    assert wrote["outcome"] == wrote_async["outcome"] == "stored"
    assert store.get(wrote_async["id"]).source_type == "operator"  # type: ignore[union-attr]
    assert recall("deploy window", 3) == asyncio.run(awaited[0]("deploy window", 3))
    assert recall("deploy window", 3)["results"][0]["id"] == wrote["id"]


def test_both_tools_refuse_an_incognito_write_before_touching_the_store() -> None:
    store = InMemoryKnowledgeStore()
    _r, ingest = bind_memory_tools(store, incognito=True)
    _ar, aingest = bind_async_memory_tools(store, incognito=True)
    with pytest.raises(IncognitoWriteError):
        ingest("secret")
    with pytest.raises(IncognitoWriteError):
        asyncio.run(aingest("secret"))
    assert store.list_chunks() == []


def test_the_a_forms_take_the_sync_forms_parameters_and_answer_alike() -> None:
    store = InMemoryKnowledgeStore()
    assert inspect.signature(amemory_recall) == inspect.signature(memory_recall, eval_str=True)
    assert inspect.signature(amemory_ingest) == inspect.signature(memory_ingest, eval_str=True)
    memory_ingest(store, "the deploy window is Friday")
    assert asyncio.run(amemory_recall(store, "deploy", 2)) == memory_recall(store, "deploy", 2)


def test_the_mcp_tools_keep_their_schemas_and_say_where_recall_was_capped() -> None:
    store = InMemoryKnowledgeStore()

    async def main() -> tuple[dict[str, Any], Any, Any]:
        async with Client(build_mcp_server(store)) as client:
            tools = {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}
            capped = await client.call_tool("memory_recall", {"query": "x", "k": 500})
            refused = await client.call_tool("memory_get", {"id": "nope"})
            return tools, capped, refused

    tools, capped, refused = asyncio.run(main())
    assert sorted(tools["memory_recall"]) == ["include_superseded", "k", "query"]
    assert sorted(tools["memory_ingest"]) == [
        "content",
        "expires_in_days",
        "namespace",
        "occurred_at",
        "subject",
    ]
    assert sorted(tools["memory_get"]) == ["id", "offset"]
    assert tools["memory_recall"]["k"]["type"] == "integer"
    assert capped.structured_content["capped_at"] == 50
    assert refused.is_error and "no memory 'nope'" in refused.content[0].text


def test_assemble_and_aassemble_take_one_parameter_list() -> None:
    sync = inspect.signature(ContextAssembler.assemble)
    loop = inspect.signature(ContextAssembler.aassemble)
    assert sync.parameters == loop.parameters
    assert list(sync.parameters) == [
        "self", "query", "session_id", "turn_index", "state", "incognito", "goal_turn", "record", "history",
        "call_index",
    ]  # fmt: skip
