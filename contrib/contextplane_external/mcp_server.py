"""An MCP tool server exposing ``memory_recall`` and ``memory_ingest`` (the operator MCP tool
bridge of the ADR's ACP row). It uses the ``mcp`` package (2.x: ``MCPServer``)::

    server = build_mcp_server(open_store(path))
    server.run("stdio")          # or attach in-process: mcp.Client(server)

``contextplane mcp serve`` (``command``) does that for the store a runtime with the same
configuration opens. Incognito servers refuse writes with a tool error that says why. The
tools are coroutine functions over the async memory API (``bind_async_memory_tools``): the
server's event loop is never blocked by a store query or an embedding, and a store with a
native async client is awaited directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from contextplane import __version__
from contextplane.errors import ContextPlaneError
from contextplane.store.protocol import KnowledgeStore
from contextplane_external.tools import MAX_RECALL_K, bind_async_memory_tools


def build_mcp_server(
    store: KnowledgeStore,
    *,
    incognito: bool = False,
    namespaces: Sequence[str] | None = None,
    name: str = "contextplane-memory",
) -> MCPServer[Any]:
    """An ``MCPServer`` with the two memory tools bound to ``store``, reporting contextplane's
    version; ``k`` is capped at ``MAX_RECALL_K`` and the result says when it was."""
    recall, ingest = bind_async_memory_tools(store, incognito=incognito, namespaces=namespaces)
    server: MCPServer[Any] = MCPServer(
        name,
        version=__version__,
        instructions="Long-term memory: recall before answering, ingest what should be remembered.",
    )

    @server.tool(name="memory_recall", description=recall.__doc__)
    async def memory_recall(query: str, k: int = 5, include_superseded: bool = False) -> dict[str, Any]:
        try:
            out: dict[str, Any] = {"results": await recall(query, k, include_superseded)}
        except ContextPlaneError as exc:
            raise ToolError(str(exc)) from exc
        if k > MAX_RECALL_K:
            out["capped_at"] = MAX_RECALL_K
        return out

    @server.tool(name="memory_ingest", description=ingest.__doc__)
    async def memory_ingest(
        content: str, expires_in_days: int | None = None, subject: str = "", occurred_at: str | None = None
    ) -> dict[str, Any]:
        try:
            return await ingest(content, expires_in_days, subject, occurred_at)
        except ContextPlaneError as exc:
            # An anticipated refusal (incognito, a malformed value): the model reads why.
            raise ToolError(str(exc)) from exc

    return server
