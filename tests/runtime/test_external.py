"""The external surface (D8): the assembler's projection, the memory tools, the MCP server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from mcp import Client

from contextplane import ContextSection, IncognitoWriteError, Row, Shed, hookimpl, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.store import open_store
from contextplane_external import ContextAssembler, bind_memory_tools, memory_ingest, memory_recall
from contextplane_external.mcp_server import build_mcp_server

from .conftest import MEMORY, InjectionLog, MarkerSections, cfg, make_agent


class StoreSection:
    """A retrieved-memory section over the real store, as the standard one would be."""

    plugin_name = "store_section"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def draft(req: Any) -> list[Row]:
            hits = req.knowledge_store.search(req.query, 3, namespaces=req.namespaces)
            return [
                Row(h.chunk.id, h.rank, h.chunk.content, trust_tier=int(h.chunk.trust_tier)) for h in hits
            ]

        register(ContextSection("retrieved", 50, Shed.DROP_ROWS, draft, MEMORY, carries_memory=True))


@pytest.fixture
def store(tmp_path: Any) -> Any:
    s = open_store(tmp_path / "memory.sqlite3")
    s.add_chunk("The deploy window is Tuesday 14:00 UTC", source_type="operator")
    s.add_chunk("Deploy window changes need two approvals <b>always</b>", source_type="operator")
    s.add_chunk("Unrelated note about lunch", source_type="operator")
    yield s
    s.close()


@pytest.mark.parametrize("incognito", [False, True])
def test_native_and_external_projections_are_byte_identical(store, incognito: bool) -> None:
    config = structure({"context": {"context_window": 200_000}})
    host = plugin_host_with([MarkerSections(), StoreSection(), InjectionLog()], config)
    agent, model, _saver, _mw = make_agent(
        host, policy=lambda _m: AIMessage("ok"), tools=[], knowledge_store=store, incognito=incognito
    )
    agent.invoke({"messages": [HumanMessage("par:when is the deploy window")]}, cfg("par"))
    native = model.calls[0][-1].content

    assembler = ContextAssembler(host=host, knowledge_store=store)
    stable_prefix, projected, sources = assembler.assemble(
        "par:when is the deploy window", session_id="par", turn_index=0, incognito=incognito
    )
    assert projected.text == native
    assert ("deploy window is Tuesday" in native) is not incognito
    if not incognito:
        assert "&lt;b&gt;always&lt;/b&gt;" in native  # the same escaping on both surfaces
        assert [s.section for s in sources].count("retrieved") == 2
    assert stable_prefix.order == ("identity", "operator_guidelines")


def test_assembler_builds_the_prefix_once_and_records_injection_and_snapshot(tmp_path) -> None:
    log = InjectionLog()
    config = structure({"context": {"context_window": 200_000}})
    host = plugin_host_with([MarkerSections(), log], config)
    backend = SQLiteBackend(tmp_path / "ext.sqlite3", config=config)
    assembler = ContextAssembler(host=host, backend=backend, tools=("memory_recall",))
    first = assembler.assemble("ext:one", session_id="ext", turn_index=0)
    second = assembler.assemble("ext:two", session_id="ext", turn_index=1)
    assert first.stable_prefix is second.stable_prefix
    assert [r[:2] for r in log.rows] == [("ext", 0), ("ext", 1)]
    assert [(r.session_id, r.turn_index, r.mode) for r in backend.injections.rows("ext")] == [
        ("ext", 0, "external"),
        ("ext", 1, "external"),
    ]
    assert [s.key for s in backend.snapshots.list("ext")] == [("ext", 0, 0), ("ext", 1, 0)]
    assert {s.mode for s in backend.snapshots.list("ext")} == {"external"}
    assert {s.prefix_sha256 for s in backend.snapshots.list("ext")} == {first.stable_prefix.sha256}
    assembler.assemble("ext:incog", session_id="ext", turn_index=2, incognito=True)
    assert len(log.rows) == 2  # incognito is never handed to the injection log
    assert len(backend.injections.rows("ext")) == 2
    # A preview records nothing at all.
    assembler.assemble("ext:preview", session_id="ext", turn_index=3, record=False)
    assert len(log.rows) == 2 and len(backend.injections.rows("ext")) == 2
    assert [s.key for s in backend.snapshots.list("ext")] == [("ext", 0, 0), ("ext", 1, 0), ("ext", 2, 0)]
    backend.close()


def test_assembly_unpacks_as_before_and_carries_the_delivered_messages(tmp_path) -> None:
    config = structure({"context": {"context_window": 200_000}})
    host = plugin_host_with([MarkerSections()], config)
    backend = SQLiteBackend(tmp_path / "msg.sqlite3", config=config)
    assembler = ContextAssembler(host=host, backend=backend)
    legacy = {"role": "user", "content": "LEGACY-FRAME", "id": "old-1", "metadata": {"context_frame": True}}
    history = [{"role": "user", "content": "msg:q0"}, legacy, {"role": "assistant", "content": "a0"},
               {"role": "user", "content": "msg:q1"}]  # fmt: skip
    assembly = assembler.assemble("msg:q1", session_id="msg", turn_index=1, history=history)
    prefix, projected, sources = assembly
    assert (prefix, projected, sources) == (assembly[0], assembly[1], assembly[2]) and len(assembly) == 3
    assert list(assembly.messages) == [
        *[m for m in history if m is not legacy],
        {"role": "user", "content": projected.text, "metadata": {"contextplane_projection": True}},
    ]
    # A later call of the same turn is delivered, not composed again: one injection row,
    # one snapshot per call. Handing back what was delivered strips the old projection.
    reply = {"role": "assistant", "content": "a1"}
    later = assembler.deliver(projected, [*history, reply], call_index=1)
    assert later == [*assembly.messages[:-1], reply, assembly.messages[-1]]
    again = assembler.deliver(projected, [*assembly.messages, reply], call_index=1)
    assert again == later
    assert len(backend.injections.rows("msg")) == 1
    snaps = backend.snapshots.list("msg")
    assert [s.key for s in snaps] == [("msg", 1, 0), ("msg", 1, 1)]
    assert [(f.message_id, f.chars) for f in snaps[0].stripped] == [("old-1", len("LEGACY-FRAME"))]
    # The second delivery of call 1 replaced the first: it stripped our own projection message.
    assert [(f.message_id, f.chars) for f in snaps[1].stripped] == [(None, len(projected.text))]
    assert [s.history_messages for s in snaps] == [3, 4]
    backend.close()


def test_memory_tools_recall_superseded_only_when_asked_and_expire(store) -> None:
    old = memory_ingest(store, "The office is on floor 3", source_type="operator")["id"]
    store.supersede(old, "The office is on floor 5")
    current = memory_recall(store, "office floor")
    assert [h["content"] for h in current] == ["The office is on floor 5"]
    audit = memory_recall(store, "office floor", include_superseded=True)
    assert sorted(h["content"] for h in audit) == ["The office is on floor 3", "The office is on floor 5"]
    assert next(h for h in audit if h["id"] == old)["superseded_by"] is not None

    temp = memory_ingest(store, "Parking is closed this week", expires_in_days=7, source_type="operator")[
        "id"
    ]
    chunk = store.get(temp)
    assert chunk is not None and chunk.expires_at is not None
    assert (chunk.expires_at - chunk.created_at).days == 7


def test_incognito_refuses_writes_before_touching_the_store(store) -> None:
    before = len(store.list_chunks())
    with pytest.raises(IncognitoWriteError, match="incognito"):
        memory_ingest(store, "secret", incognito=True)
    _recall, ingest = bind_memory_tools(store, incognito=True)
    with pytest.raises(IncognitoWriteError, match="incognito"):
        ingest("secret too")
    assert len(store.list_chunks()) == before


def test_mcp_server_exposes_both_tools_in_process(store) -> None:
    async def main() -> tuple[Any, ...]:
        async with Client(build_mcp_server(store)) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            wrote = await client.call_tool(
                "memory_ingest", {"content": "Standup moved to 09:30", "expires_in_days": 2}
            )
            found = await client.call_tool("memory_recall", {"query": "standup", "k": 3})
            return names, wrote, found

    names, wrote, found = asyncio.run(main())
    assert names == ["memory_get", "memory_ingest", "memory_recall"]
    assert not wrote.is_error
    new_id = wrote.structured_content["id"]
    assert store.get(new_id).expires_at is not None
    results = found.structured_content["results"]
    assert [r["id"] for r in results] == [new_id]
    assert results[0]["content"] == "Standup moved to 09:30"


def test_mcp_ingest_writes_the_event_time_and_recall_shows_it_only_when_set(store) -> None:
    async def main() -> tuple[Any, ...]:
        async with Client(build_mcp_server(store)) as client:
            wrote = await client.call_tool(
                "memory_ingest",
                {"content": "Melanie: we went camping", "occurred_at": "2023-07-14T11:30:00+02:00"},
            )
            bad = await client.call_tool("memory_ingest", {"content": "a turn", "occurred_at": "2023-07-14"})
            found = await client.call_tool("memory_recall", {"query": "camping", "k": 3})
            plain = await client.call_tool("memory_recall", {"query": "lunch", "k": 3})
            return wrote, bad, found, plain

    before = len(store.list_chunks())
    wrote, bad, found, plain = asyncio.run(main())
    assert not wrote.is_error
    new_id = wrote.structured_content["id"]
    assert store.get(new_id).occurred_at.isoformat() == "2023-07-14T09:30:00+00:00"
    assert bad.is_error and "occurred_at: '2023-07-14' has no timezone" in bad.content[0].text
    assert len(store.list_chunks()) == before + 1
    assert found.structured_content["results"][0]["occurred_at"] == "2023-07-14T09:30:00+00:00"
    assert "occurred_at" not in plain.structured_content["results"][0]  # no event time: as before
    _recall, ingest = bind_memory_tools(store, source_type="operator")
    synced = ingest("Caroline: the parade", occurred_at="2023-06-11T10:00:00Z")
    assert store.get(synced["id"]).occurred_at.isoformat() == "2023-06-11T10:00:00+00:00"


def test_mcp_server_in_incognito_refuses_ingest_with_a_tool_error(store) -> None:
    before = len(store.list_chunks())

    async def main() -> Any:
        async with Client(build_mcp_server(store, incognito=True)) as client:
            return await client.call_tool("memory_ingest", {"content": "do not keep"})

    result = asyncio.run(main())
    assert result.is_error
    assert "incognito" in result.content[0].text
    assert len(store.list_chunks()) == before
