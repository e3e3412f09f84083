"""The MCP server's stdio transport, answering every request, even one it cannot read.

The ``mcp`` package's stdio transport hands a line it cannot parse (a lone-surrogate escape
such as ``"\\ud800"``, nesting past its parser's depth limit, plain garbage) to the session as
an exception, which logs it and answers nothing: the server stays up, but a client without a
timeout waits for ever. Here each line is checked before the session sees it, and one that
does not parse as a JSON-RPC message is answered at once with a JSON-RPC error (JSON-RPC 2.0,
section 5.1: -32700 parse error, -32600 invalid request), carrying the request's id when a
lenient reading can find one (else ``null``, as the spec says). A notification is never
answered, as the spec says.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterable, AsyncIterator
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
import pydantic
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

log = logging.getLogger("contextplane.mcp")

#: The first ``"id"`` member of a message whose text is too deep for ``json.loads``; trusted
#: only when it sits at the top level (nothing but the opening brace before it).
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def _lenient_id(line: str) -> tuple[bool, int | str | None]:
    """``(is_notification, id)`` as far as the text shows: a message with a ``method`` and no
    ``id`` is a notification (never answered); ``None`` when no id can be found."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        match = _ID.search(line)
        if match is None or line[: match.start()].count("{") != 1 or "[" in line[: match.start()]:
            return False, None
        try:
            found = json.loads(match.group(1))
        except ValueError:
            return False, None
        return False, found if isinstance(found, int | str) else None
    if not isinstance(data, dict):
        return False, None
    if "id" not in data:
        return "method" in data, None
    found = data["id"]
    if isinstance(found, str):
        found = found.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate cannot be sent
    return False, found if isinstance(found, int | str) and not isinstance(found, bool) else None


def rejection(line: str, exc: pydantic.ValidationError) -> SessionMessage | None:
    """The JSON-RPC error answering a line that is not a JSON-RPC message (None for a
    notification). The text is one readable sentence: no validator internals, no URLs."""
    notification, request_id = _lenient_id(line)
    if notification:
        return None
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        code = types.PARSE_ERROR
        reason = str(first["msg"]).removeprefix("Invalid JSON: ")
        hint = ""
        if "escape" in reason:
            hint = "; a lone surrogate escape such as \\ud800 is not text: send the character's UTF-8"
        elif "recursion" in reason:
            hint = "; the request nests arrays or objects deeper than the server reads"
        message = f"parse error: the request is not valid JSON ({reason}){hint}"
    else:
        code = types.INVALID_REQUEST
        message = (
            "invalid request: not a JSON-RPC 2.0 message (expected an object with "
            '"jsonrpc": "2.0", an "id", a "method" and optional "params")'
        )
    return SessionMessage(
        types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
    )


class _Checked:
    """The client's lines, each checked before the session sees it: one that is not a JSON-RPC
    message is answered through ``answers`` and never passed on."""

    def __init__(self, lines: AsyncIterable[str], answers: MemoryObjectSendStream[SessionMessage]) -> None:
        self._lines = lines
        self._answers = answers

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self._answers:
            async for line in self._lines:
                if not line.strip():
                    continue
                try:
                    types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except pydantic.ValidationError as exc:
                    answer = rejection(line, exc)
                    log.info("answered an unreadable MCP message with a JSON-RPC error (%d chars)", len(line))
                    if answer is not None:
                        await self._answers.send(answer)
                    continue
                yield line


async def serve_stdio(lowlevel: Any, init_options: Any) -> None:
    """Run ``lowlevel`` (an ``mcp`` low-level ``Server``) over stdin/stdout until the client
    disconnects, answering every request (see the module docstring)."""
    answers_in: MemoryObjectSendStream[SessionMessage]
    answers_out: MemoryObjectReceiveStream[SessionMessage]
    answers_in, answers_out = anyio.create_memory_object_stream[SessionMessage](16)
    raw = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    checked: Any = _Checked(raw, answers_in)
    async with stdio_server(stdin=checked) as (read_stream, write_stream):

        async def forward() -> None:
            async with answers_out:
                async for answer in answers_out:
                    await write_stream.send(answer)

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            await lowlevel.run(read_stream, write_stream, init_options)
            tg.cancel_scope.cancel()
