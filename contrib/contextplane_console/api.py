"""The JSON API: every page's data, for scripts and for the tests (documented in docs/console.md).

Errors are JSON, ``{"error": "<field>: <what was wrong>", "field": "<field>"}``, with 400 for
a bad value, 404 for an unknown id, 409 for a lifecycle conflict (superseding a row that is
no longer valid), 413/415 for a body too large or not JSON, 401/403 from the guard.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from contextplane.memory.model import REVIEW_STATES, utc_now, validate_review_state
from contextplane_console import explaining, lineage, memories
from contextplane_console.errors import refuse
from contextplane_console.inspector import call_view, sessions_json, snapshot_summary
from contextplane_console.params import MAX_BODY_BYTES, json_object, only_fields, whole
from contextplane_console.preview import PreviewOptions, run_preview

if TYPE_CHECKING:
    from contextplane_console.app import Console

Handler = Callable[["Console", Request], Awaitable[Any]]

#: What a superseding write may set besides its text (the rest is inherited, ADR D7).
SUPERSEDE_FIELDS = ("content", "source_type", "source", "heading", "subject", "occurred_at")
#: Who wrote a row through the console: an operator (tier 3), unless the request says otherwise.
CONSOLE_SOURCE_TYPE = "operator"
CONSOLE_SOURCE = "contextplane console"


async def read_body(request: Request) -> bytes:
    """The body, refused past ``MAX_BODY_BYTES`` before it is all read."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise refuse("body", f"{length} bytes is more than the {MAX_BODY_BYTES} this console reads", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise refuse("body", f"more than the {MAX_BODY_BYTES} bytes this console reads", 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(request: Request) -> dict[str, Any]:
    kind = request.headers.get("content-type", "")
    if kind.split(";", 1)[0].strip().lower() != "application/json":
        raise refuse("Content-Type", f"expected application/json, got {kind or 'none'!r}", 415)
    return json_object(await read_body(request))


def _query(request: Request) -> dict[str, str]:
    return dict(request.query_params)


def _id(request: Request) -> str:
    return str(request.path_params["chunk_id"])


# ---------------------------------------------------------------------------- memory


async def list_chunks(console: Console, request: Request) -> JSONResponse:
    params = _query(request)
    flt = memories.MemoryFilter.from_params(params)
    offset, limit = memories.page_params(params)
    page = await console.call(memories.list_page, console.backend.memories, flt, offset, limit)
    now = utc_now()
    return JSONResponse(
        {
            "items": [memories.chunk_json(c, now) for c in page.items],
            "offset": page.offset,
            "limit": page.limit,
            "next_offset": page.next_offset,
            "filters": flt.as_params(),
            "search_truncated": page.search_truncated,
        }
    )


def _detail(console: Console, chunk_id: str) -> dict[str, Any]:
    store = console.backend.memories
    past = lineage.lineage(store, lineage.require(store, chunk_id))
    now = utc_now()
    return {
        "memory": memories.chunk_json(past.chunk, now),
        "chain": [memories.chunk_json(c, now) for c in past.chain],
        "supersedes": [memories.chunk_json(c, now) for c in past.supersedes],
        "history": [lineage.event_json(e) for e in past.history],
        "history_kept": past.kept,
    }


async def get_chunk(console: Console, request: Request) -> JSONResponse:
    return JSONResponse(await console.call(_detail, console, _id(request)))


def _history(console: Console, chunk_id: str) -> dict[str, Any]:
    store = console.backend.memories
    events = lineage.history_or_404(store, chunk_id)
    chunk = store.get(chunk_id)
    return {
        "memory_id": chunk_id,
        "lifecycle": "purged" if chunk is None else memories.lifecycle_state(chunk),
        "history_kept": lineage.keeps_history(store),
        "events": [lineage.event_json(e) for e in events],
    }


async def chunk_history(console: Console, request: Request) -> JSONResponse:
    return JSONResponse(await console.call(_history, console, _id(request)))


def review_one(console: Console, chunk_id: str, state: object) -> dict[str, Any]:
    store = console.backend.memories
    memories.require(store, chunk_id)
    store.set_review_state(chunk_id, validate_review_state(state, "state"), by=console.reviewer)
    return _detail(console, chunk_id)


async def review(console: Console, request: Request) -> JSONResponse:
    body = await json_body(request)
    only_fields(body, ("state",))
    if "state" not in body:
        raise refuse("state", f"required: one of {', '.join(sorted(REVIEW_STATES))}")
    return JSONResponse(await console.call(review_one, console, _id(request), body["state"]))


def supersede_one(console: Console, chunk_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    store = console.backend.memories
    old = memories.require(store, chunk_id)
    if old.invalidated_at is not None:
        hint = f"supersede {old.superseded_by} instead" if old.superseded_by else "it is no longer valid"
        raise refuse("id", f"memory {chunk_id} is already {memories.lifecycle_state(old)}; {hint}", 409)
    content = fields.pop("content")
    fields.setdefault("source_type", CONSOLE_SOURCE_TYPE)
    fields.setdefault("source", CONSOLE_SOURCE)
    new_id = store.supersede(chunk_id, content, **fields)
    out = _detail(console, chunk_id)
    out["new"] = memories.chunk_json(memories.require(store, new_id))
    return out


def supersede_fields(body: dict[str, Any]) -> dict[str, Any]:
    only_fields(body, SUPERSEDE_FIELDS)
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        raise refuse("content", "required: the new text that replaces this memory")
    for name in SUPERSEDE_FIELDS[1:]:
        if name in body and not isinstance(body[name], str):
            raise refuse(name, f"expected text, got {type(body[name]).__name__}")
    return dict(body)


async def supersede(console: Console, request: Request) -> JSONResponse:
    fields = supersede_fields(await json_body(request))
    return JSONResponse(await console.call(supersede_one, console, _id(request), fields), status_code=201)


def expire_one(console: Console, chunk_id: str, expires_at: str | None) -> dict[str, Any]:
    store = console.backend.memories
    memories.require(store, chunk_id)
    store.set_expires_at(chunk_id, expires_at, by=console.reviewer)
    return _detail(console, chunk_id)


async def expiry(console: Console, request: Request) -> JSONResponse:
    body = await json_body(request)
    only_fields(body, ("expires_at",))
    if "expires_at" not in body:
        raise refuse("expires_at", "required: an ISO-8601 timestamp with an offset, or null to clear")
    value = body["expires_at"]
    if value is not None and not isinstance(value, str):
        raise refuse("expires_at", f"expected ISO-8601 text or null, got {type(value).__name__}")
    return JSONResponse(await console.call(expire_one, console, _id(request), value))


async def bulk_review(console: Console, request: Request) -> JSONResponse:
    body = await json_body(request)
    only_fields(body, ("ids", "state"))
    ids = body.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise refuse("ids", "expected a list of memory ids (text)")
    state = body.get("state")
    if not isinstance(state, str):
        raise refuse("state", f"required: one of {', '.join(memories.BULK_STATES)}")
    updated = await console.call(
        memories.bulk_review, console.backend.memories, ids, state, by=console.reviewer
    )
    now = utc_now()
    return JSONResponse({"state": state, "updated": [memories.chunk_json(c, now) for c in updated]})


# ---------------------------------------------------------------------------- records


async def sessions(console: Console, request: Request) -> JSONResponse:
    rows = await console.call(console.backend.snapshots.sessions)
    return JSONResponse({"sessions": sessions_json(rows)})


async def snapshots(console: Console, request: Request) -> JSONResponse:
    params = _query(request)
    session = params.get("session")
    limit = whole(params, "limit", default=None, lo=1, hi=10_000)
    rows = await console.call(console.backend.snapshots.list, session, limit=limit)
    return JSONResponse({"snapshots": [snapshot_summary(s) for s in rows]})


def call_key(params: dict[str, str]) -> tuple[str, int, int]:
    session = params.get("session")
    if session is None:
        raise refuse("session", "required: the session id of the call")
    turn = whole(params, "turn", default=None, lo=0)
    if turn is None:
        raise refuse("turn", "required: the turn index of the call")
    call = whole(params, "call", default=0, lo=0)
    assert call is not None
    return session, turn, call


async def snapshot_call(console: Console, request: Request) -> JSONResponse:
    session, turn, call = call_key(_query(request))
    view = await console.call(call_view, console.backend, console.host, session, turn, call)
    return JSONResponse(view.as_json())


async def injections(console: Console, request: Request) -> JSONResponse:
    params = _query(request)
    limit = whole(params, "limit", default=None, lo=1, hi=10_000)
    rows = await console.call(console.backend.injections.rows, params.get("session"), limit)
    return JSONResponse(
        {
            "rows": [
                {
                    "id": r.id,
                    "session_id": r.session_id,
                    "turn_index": r.turn_index,
                    "at": r.at,
                    "mode": r.mode,
                    "approx_tokens": r.approx_tokens,
                    "used_chars": r.used_chars,
                    "budget_chars": r.budget_chars,
                    "delivered": r.delivered,
                }
                for r in rows
            ]
        }
    )


async def preview(console: Console, request: Request) -> JSONResponse:
    options = PreviewOptions.from_json(await json_body(request))
    result = await console.call(run_preview, console.runtime, options)
    return JSONResponse(result.as_json())


async def explain(console: Console, request: Request) -> JSONResponse:
    req = explaining.ExplainRequest.from_params(_query(request))
    verdict = await console.call(explaining.run_explain, console.backend, console.host, req)
    return JSONResponse(explaining.verdict_json(verdict))


# ---------------------------------------------------------------------------- the API itself


async def csrf(console: Console, request: Request) -> JSONResponse:
    return JSONResponse({"csrf_token": console.csrf_token, "header": "X-CSRF-Token"})


async def index(console: Console, request: Request) -> JSONResponse:
    return JSONResponse(
        {
            "endpoints": [{"method": m, "path": p, "doc": d} for m, p, _fn, d in ROUTES],
            "docs": "docs/console.md",
        }
    )


ROUTES: list[tuple[str, str, Handler, str]] = [
    ("GET", "/api", index, "this list"),
    ("GET", "/api/csrf", csrf, "the CSRF token state-changing requests send as X-CSRF-Token"),
    ("GET", "/api/memory/chunks", list_chunks, "memories, filtered and paged, pending first"),
    ("GET", "/api/memory/chunks/{chunk_id}", get_chunk, "one memory, its chain both ways, its history"),
    ("GET", "/api/memory/chunks/{chunk_id}/history", chunk_history, "a memory's history (also when purged)"),
    ("POST", "/api/memory/chunks/{chunk_id}/review", review, "set the review state"),
    ("POST", "/api/memory/chunks/{chunk_id}/supersede", supersede, "replace with new text"),
    ("POST", "/api/memory/chunks/{chunk_id}/expiry", expiry, "set or clear the expiry"),
    ("POST", "/api/memory/review", bulk_review, "confirm or reject a selection"),
    ("GET", "/api/snapshots/sessions", sessions, "sessions with prompt snapshots, newest first"),
    ("GET", "/api/snapshots", snapshots, "model calls (snapshots), of one session or all"),
    ("GET", "/api/snapshots/call", snapshot_call, "what one model call saw"),
    ("GET", "/api/injections", injections, "the injection log"),
    ("POST", "/api/preview", preview, "compose a projection for a query, recording nothing"),
    ("GET", "/api/explain", explain, "why a memory was or was not delivered in a turn: one verdict"),
]
