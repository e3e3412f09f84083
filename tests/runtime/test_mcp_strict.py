"""The MCP server is strict and bounded (issue 23 items 9-10, issue 26 item 6): an unknown
argument or scope is refused in one readable sentence, what a tool returns and what a write
accepts are bounded, and over stdio every request is answered, even one that cannot be read."""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from contextplane.errors import ValidationError
from contextplane.store import SQLiteKnowledgeStore, open_store
from contextplane_external import bind_memory_tools
from contextplane_external.mcp_server import build_mcp_server
from contextplane_external.tools import ToolLimits


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = open_store(tmp_path / "memory.sqlite3")
    yield s
    s.close()


def call(server: Any, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async def main() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(main())


def test_an_unknown_argument_or_scope_is_refused_in_one_sentence(store) -> None:
    unknown, bad_scope, bad_type, scoped = call(
        build_mcp_server(store),
        ("memory_ingest", {"content": "x", "namspace": "project:a"}),
        ("memory_ingest", {"content": "x", "namespace": "nope"}),
        ("memory_recall", {"query": "x", "k": "many"}),
        ("memory_ingest", {"content": "kept in its scope", "namespace": "project:a"}),
    )
    assert unknown.is_error and unknown.content[0].text == (
        "memory_ingest: unknown argument 'namspace'; it takes content, expires_in_days, subject, namespace, "
        "occurred_at"
    )
    assert bad_scope.is_error and bad_scope.content[0].text == (
        "namespace: 'nope' is not a scope; use '' (global), 'project:<id>' or 'session:<id>'"
    )
    assert bad_type.is_error and bad_type.content[0].text.startswith(
        "memory_recall: argument k: input should be a valid integer"
    )
    for refused in (unknown, bad_scope, bad_type):
        text = refused.content[0].text
        assert "http" not in text and "pydantic" not in text and "\n" not in text
    assert not scoped.is_error
    # Nothing refused was stored, and the scoped write went to its scope, not the global one.
    assert [(c.content, c.namespace) for c in store.list_chunks(limit=None)] == [("kept in its scope", "project:a")]


def test_a_scoped_server_refuses_writes_to_a_scope_it_does_not_serve(store) -> None:
    with pytest.raises(ValidationError, match="'nope' is not a scope"):
        build_mcp_server(store, namespaces=["nope"])
    (other,) = call(
        build_mcp_server(store, namespaces=["project:a"]),
        ("memory_ingest", {"content": "x", "namespace": "project:b"}),
    )
    assert other.is_error and "'project:b' is not a scope this server serves" in other.content[0].text
    assert store.list_chunks(limit=None) == []


def test_recall_is_bounded_per_row_and_in_total_and_get_reads_on(store) -> None:
    huge = "deploy " + "".join(f"line {i:05d} of the runbook\n" for i in range(40_000))  # ~1 MB
    huge_id = store.add_chunk(huge, source_type="operator")
    for i in range(30):
        store.add_chunk(f"deploy note {i} " + "y" * 3_000, source_type="operator")
    limits = ToolLimits(max_row_chars=4_000, max_result_chars=20_000)
    found, one = call(
        build_mcp_server(store, limits=limits),
        ("memory_recall", {"query": "deploy", "k": 200}),
        ("memory_recall", {"query": "runbook"}),
    )
    out = found.structured_content
    assert out["capped_at"] == 50
    contents = [row["content"] for row in out["results"]]
    assert sum(map(len, contents)) <= 20_000 + 200 * len(contents)  # each row: its room plus a marker
    assert out["omitted"] == 31 - len(contents) and "tools.max_result_chars" in out["note"]
    (row,) = one.structured_content["results"]
    assert row["content_chars"] == len(huge) and row["next_offset"] == 4_000
    assert row["content"].endswith(f"memory_get with id={huge_id!r} and offset=4000 reads on]")
    assert row["content"].startswith(huge[:3_900])

    # memory_get reads on from the offset, a bounded window at a time, to the end.
    server = build_mcp_server(store, limits=limits)
    read, offset = huge[:4_000], 4_000
    while offset is not None:
        (got,) = call(server, ("memory_get", {"id": huge_id, "offset": offset}))
        page = got.structured_content
        assert len(page["content"]) <= 4_000 + 120
        read += page["content"].split("\n[… cut:")[0] if page["next_offset"] else page["content"]
        offset = page["next_offset"]
        if offset is not None and offset > 40_000:
            break  # enough pages to show it reads on; the last page is checked below
    (last,) = call(server, ("memory_get", {"id": huge_id, "offset": len(huge) - 10}))
    assert last.structured_content == {
        "id": huge_id, "content": huge[-10:], "offset": len(huge) - 10, "content_chars": len(huge),
        "next_offset": None, "superseded_by": None,
    }
    assert huge.startswith(read)
    (missing,) = call(server, ("memory_get", {"id": "nope"}))
    assert missing.is_error and missing.content[0].text == "id: no memory 'nope' this server can read"
    store.set_review_state(huge_id, "rejected")  # a row no recall returns is no row to read on in
    (rejected,) = call(server, ("memory_get", {"id": huge_id}))
    assert rejected.is_error and rejected.content[0].text == f"id: no memory {huge_id!r} this server can read"
    (scoped,) = call(build_mcp_server(store, namespaces=["project:a"]), ("memory_get", {"id": "2"}))
    assert scoped.is_error  # row 2 is global: outside the server's scopes


def test_a_write_over_the_limit_is_refused_with_its_size(store) -> None:
    (refused, taken) = call(
        build_mcp_server(store, limits=ToolLimits(max_write_chars=1_000)),
        ("memory_ingest", {"content": "z" * 1_001}),
        ("memory_ingest", {"content": "z" * 1_000}),
    )
    assert refused.is_error and refused.content[0].text == (
        "content: 1,001 chars, over the 1,000-char limit for one memory (store.max_write_chars); "
        "split it into smaller memories, or raise store.max_write_chars"
    )
    assert not taken.is_error and len(store.list_chunks()) == 1
    _recall, ingest = bind_memory_tools(store)  # the in-process tools: the default bound, 100,000
    with pytest.raises(ValidationError, match="100,001 chars"):
        ingest("z" * 100_001)


# --- a real `contextplane mcp serve` over raw stdio ------------------------------------------


class RawServer:
    """``contextplane mcp serve`` as a subprocess, spoken to line by line (JSON-RPC over
    stdio), with a timeout on every read so a request left unanswered fails the test."""

    def __init__(self, db: Path, *extra: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from contextplane.cli import main; main()", "mcp", "serve", "--db", str(db), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 20.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no answer within the timeout"
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def close(self) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        code = self.proc.wait(20)
        return code, self.proc.stderr.read().decode()


def test_every_request_is_answered_even_one_that_cannot_be_read(tmp_path: Path) -> None:
    db = tmp_path / "memory.sqlite3"
    with SQLiteKnowledgeStore(db) as s:
        s.add_chunk("the deploy window is Tuesday", source_type="operator")
    server = RawServer(db)
    try:
        server.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
        assert server.receive()["id"] == 1
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

        def recall(rid: int, query: str) -> str:
            return (f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"memory_recall",'
                    f'"arguments":{{"query":{query}}}}}}}')

        server.send(recall(2, '"deploy \\ud800 window"'))  # a lone-surrogate escape
        surrogate = server.receive()
        server.send(recall(3, "[" * 200 + "]" * 200))  # nested ~200 levels
        nested = server.receive()
        server.send(recall(4, "[" * 200_000 + "]" * 200_000))  # too deep even for json.loads
        deeper = server.receive()
        server.send("not json at all")
        garbage = server.receive()
        server.send('{"jsonrpc": "2.0", "id": 6}')  # JSON, but no method
        shapeless = server.receive()
        server.send(recall(7, '"deploy window"'))  # and the server still answers as usual
        fine = server.receive()
    finally:
        code, _stderr = server.close()
    assert code == 0
    for answer, rid in ((surrogate, 2), (nested, 3), (deeper, 4), (garbage, None)):
        assert answer["id"] == rid and answer["error"]["code"] == -32700, answer
        assert answer["error"]["message"].startswith("parse error: the request is not valid JSON (")
        assert "http" not in answer["error"]["message"]
    assert "lone surrogate escape" in surrogate["error"]["message"]
    assert "deeper than the server reads" in nested["error"]["message"]
    assert shapeless["id"] == 6 and shapeless["error"]["code"] == -32600
    assert fine["id"] == 7 and "Tuesday" in fine["result"]["structuredContent"]["results"][0]["content"]


def test_serve_refuses_a_namespace_that_is_not_a_scope_at_start(tmp_path: Path) -> None:
    db = tmp_path / "memory.sqlite3"
    server = RawServer(db, "--namespace", "not a scope")
    code, stderr = server.close()
    assert code == 2
    assert stderr == (
        "error: --namespace: 'not a scope' is not a scope; use '' (global), 'project:<id>' or 'session:<id>'\n"
    )
    assert not db.exists()
