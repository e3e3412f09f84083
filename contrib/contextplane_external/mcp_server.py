"""An MCP tool server exposing ``memory_recall``, ``memory_ingest`` and ``memory_get`` (the
operator MCP tool bridge of the ADR's ACP row). It uses the ``mcp`` package (2.x: ``MCPServer``)::

    server = build_mcp_server(open_store(path))
    server.run("stdio")          # or attach in-process: mcp.Client(server)

``contextplane mcp serve`` (``command``) does that for the store a runtime with the same
configuration opens. Incognito servers refuse writes with a tool error that says why. The
tools are coroutine functions over the async memory API (``bind_async_memory_tools``): the
server's event loop is never blocked by a store query or an embedding, and a store with a
native async client is awaited directly.

The tools are strict and bounded: an argument a tool does not take, or a value of the wrong
type, is refused with one readable sentence (the validator's internals and links are not the
model's business); what a tool returns and what a write accepts are bounded by ``ToolLimits``.
Over stdio, every request is answered, even one that cannot be read (``stdio``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import pydantic
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from contextplane import __version__
from contextplane.errors import ContextPlaneError
from contextplane.signatures import signature_of
from contextplane.store.protocol import KnowledgeStore
from contextplane_external.stdio import serve_stdio
from contextplane_external.tools import (
    MAX_RECALL_K,
    ToolLimits,
    bind_async_memory_get,
    bind_async_memory_tools,
    check_scopes,
)


def _readable(tool: str, exc: pydantic.ValidationError) -> str:
    """One sentence per bad argument: its name, what was expected, what came (shortened)."""
    parts = []
    for err in exc.errors(include_url=False):
        name = ".".join(str(p) for p in err["loc"]) or "arguments"
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        parts.append(f"argument {name}: {err['msg'].lower()} (got {got})")
    return f"{tool}: " + "; ".join(parts)


class ContextPlaneMCPServer(MCPServer[Any]):
    """``MCPServer`` with strict tool arguments and a stdio transport that answers every
    request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Each tool's argument names, so an unknown one is refused, never dropped.
        self.tool_arguments: dict[str, tuple[str, ...]] = {}

    def strict_tool(self, fn: Any, name: str) -> None:
        self.add_tool(fn, name=name, description=fn.__doc__)
        self.tool_arguments[name] = tuple(inspect.signature(fn).parameters)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = self.tool_arguments.get(name)
        if known is not None:
            unknown = sorted(set(arguments) - set(known))
            if unknown:
                raise ToolError(
                    f"{name}: unknown argument{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(map(repr, unknown))}; it takes {', '.join(known)}"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, pydantic.ValidationError):
                raise ToolError(_readable(name, cause)) from cause
            if isinstance(cause, ToolError):  # our own refusal: its sentence, without a wrapper
                raise ToolError(str(cause)) from cause.__cause__
            raise

    async def run_stdio_async(self) -> None:
        # (The low-level server is the parent's; its own stdio runner drops unreadable lines.)
        lowlevel = self._lowlevel_server
        await serve_stdio(lowlevel, lowlevel.create_initialization_options())

    def run(self, transport: Any = "stdio", **kwargs: Any) -> None:
        if transport == "stdio":
            anyio.run(self.run_stdio_async)
        else:
            super().run(transport, **kwargs)


def _refusing(tool: Callable[..., Awaitable[dict[str, Any]]]) -> Callable[..., Awaitable[dict[str, Any]]]:
    """``tool`` as the server serves it (its name, description and parameters): an anticipated
    refusal (incognito, a malformed value, too long) becomes a tool error the model reads, and a
    recall asked for more than ``MAX_RECALL_K`` results says where it was capped."""
    signature = signature_of(tool)

    async def served(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            out = await tool(*args, **kwargs)
        except ContextPlaneError as exc:
            raise ToolError(str(exc)) from exc
        k = signature.bind(*args, **kwargs).arguments.get("k")
        if isinstance(k, int) and k > MAX_RECALL_K:
            out["capped_at"] = MAX_RECALL_K
        return out

    served.__name__ = served.__qualname__ = tool.__name__
    served.__doc__ = tool.__doc__
    served.__signature__ = signature  # type: ignore[attr-defined]
    served.__annotations__ = dict(tool.__annotations__)
    return served


def build_mcp_server(
    store: KnowledgeStore,
    *,
    incognito: bool = False,
    namespaces: Sequence[str] | None = None,
    name: str = "contextplane-memory",
    limits: ToolLimits | None = None,
) -> ContextPlaneMCPServer:
    """An MCP server with the memory tools bound to ``store``, reporting contextplane's version;
    ``k`` is capped at ``MAX_RECALL_K`` and the result says when it was; results and writes are
    bounded by ``limits`` (``ToolLimits()`` when None). ``namespaces`` are checked here: a
    string that is not a scope raises ``ValidationError`` before anything is served."""
    scopes = check_scopes(namespaces)
    recall, ingest = bind_async_memory_tools(store, incognito=incognito, namespaces=scopes, limits=limits)
    get = bind_async_memory_get(store, namespaces=scopes, limits=limits)
    server = ContextPlaneMCPServer(
        name,
        version=__version__,
        instructions="Long-term memory: recall before answering, ingest what should be remembered.",
    )
    for tool in (recall, ingest, get):
        server.strict_tool(_refusing(tool), tool.__name__)
    return server
