"""The HTML pages: the memory review, the prompt inspector and the preview form.

Pages are server-rendered (Jinja2, every value escaped); htmx swaps the part a form changes
(the results of a filter, one row after a review, the detail panel after an action, the
preview's result), so each action is one request and the page never runs memory text. The
data comes from the same functions the JSON API calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from contextplane import StoreError, ValidationError
from contextplane.memory.model import DELIVERY_POLICIES, MEMORY_KINDS, utc_now
from contextplane_console import api, explaining, lineage, memories
from contextplane_console.errors import Refusal, refuse
from contextplane_console.inspector import call_view, memory_sections
from contextplane_console.preview import PreviewOptions, run_preview

if TYPE_CHECKING:
    from contextplane_console.app import Console

Handler = Callable[["Console", Request], Awaitable[Any]]

CHOICES = {
    "memory_kind": sorted(MEMORY_KINDS),
    "delivery_policy": sorted(DELIVERY_POLICIES),
    "review_state": list(memories.REVIEW_ORDER),
    "trust_tier": list(memories.TRUST_TIERS),
    "lifecycle": list(memories.LIFECYCLE_STATES),
}


async def form_body(request: Request) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """An htmx form post: its fields (last value wins) and every pair (for repeated names)."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise refuse(
            "Content-Type", f"expected a form (application/x-www-form-urlencoded), got {kind!r}", 415
        )
    pairs = parse_qsl((await api.read_body(request)).decode("utf-8", "replace"), keep_blank_values=True)
    return dict(pairs), pairs


# ---------------------------------------------------------------------------- memory


def _results(console: Console, params: dict[str, str], **extra: Any) -> dict[str, Any]:
    flt = memories.MemoryFilter.from_params(params)
    offset, limit = memories.page_params(params)
    page = memories.list_page(console.backend.memories, flt, offset, limit)
    base = flt.as_params()
    if limit != memories.DEFAULT_PAGE:
        base["limit"] = str(limit)

    def link(at: int) -> str:
        return "/memory?" + urlencode({**base, "offset": str(at)} if at else base)

    return {
        "page": page,
        "filters": flt,
        "query": base,
        "prev_link": link(max(0, offset - limit)) if offset > 0 else None,
        "next_link": link(page.next_offset) if page.next_offset is not None else None,
        "now": utc_now(),
        **extra,
    }


async def memory_list(console: Console, request: Request) -> Response:
    params = dict(request.query_params)
    try:
        context = await console.call(_results, console, params)
    except Refusal as exc:  # a bad filter: show the form with the error, not a bare error page
        if request.headers.get("hx-request"):
            raise
        context = await console.call(_results, console, {}, error=exc.message)
        params = {}
    if request.headers.get("hx-target") == "results":
        return console.render("_results.html", **context)
    return console.render("memory_list.html", choices=CHOICES, params=params, **context)


async def memory_bulk(console: Console, request: Request) -> Response:
    form, pairs = await form_body(request)
    ids = [v for k, v in pairs if k == "ids"]
    state = form.get("state", "")
    filters = {k: v for k, v in form.items() if k not in {"ids", "state"}}
    try:
        done = await console.call(
            memories.bulk_review, console.backend.memories, ids, state, by=console.reviewer
        )
        flash = f"{'Confirmed' if state == 'confirmed' else 'Rejected'} {len(done)}: " + ", ".join(
            c.id for c in done
        )
        context = await console.call(_results, console, filters, flash=flash)
        return console.render("_results.html", **context)
    except Refusal as exc:
        context = await console.call(_results, console, filters, error=exc.message)
        return console.render("_results.html", exc.status, **context)


def _panel(console: Console, chunk_id: str, **extra: Any) -> dict[str, Any]:
    store = console.backend.memories
    past = lineage.lineage(store, lineage.require(store, chunk_id))
    return {
        "chunk": past.chunk,
        "chain": list(past.chain),
        "supersedes": list(past.supersedes),
        "history": list(past.history),
        "history_kept": past.kept,
        "now": utc_now(),
        **extra,
    }


async def memory_detail(console: Console, request: Request) -> Response:
    context = await console.call(_panel, console, str(request.path_params["chunk_id"]))
    return console.render("memory_detail.html", **context)


async def _act(console: Console, request: Request, action: Callable[[str, dict[str, str]], str]) -> Response:
    """Run one action on a row and re-render what the form targets (its panel or its list row),
    with the error in place when the action is refused."""
    chunk_id = str(request.path_params["chunk_id"])
    form, _pairs = await form_body(request)
    template = "_row.html" if form.get("view") == "row" else "_panel.html"
    try:
        flash = await console.call(action, chunk_id, form)
    except Refusal as exc:
        if exc.status == 404:
            raise
        status, message = exc.status, exc.message
    except ValidationError as exc:  # the core's own check (an expiry it cannot read), by field
        status, message = 400, str(exc)
    except StoreError as exc:  # a lifecycle conflict: someone else changed the row meanwhile
        status, message = 409, str(exc)
    else:
        context = await console.call(_panel, console, chunk_id, flash=flash)
        return console.render(template, **context)
    context = await console.call(_panel, console, chunk_id, error=message)
    return console.render(template, status, **context)


async def memory_review(console: Console, request: Request) -> Response:
    def act(chunk_id: str, form: dict[str, str]) -> str:
        api.review_one(console, chunk_id, form.get("state", ""))
        return f"memory {chunk_id}: review state {form.get('state')}"

    return await _act(console, request, act)


async def memory_supersede(console: Console, request: Request) -> Response:
    def act(chunk_id: str, form: dict[str, str]) -> str:
        out = api.supersede_one(console, chunk_id, api.supersede_fields({"content": form.get("content", "")}))
        return f"memory {chunk_id} superseded by {out['new']['id']}"

    return await _act(console, request, act)


async def memory_expiry(console: Console, request: Request) -> Response:
    def act(chunk_id: str, form: dict[str, str]) -> str:
        if "clear" in form:
            api.expire_one(console, chunk_id, None)
            return f"memory {chunk_id}: expiry cleared"
        value = form.get("expires_at", "").strip()
        if not value:
            raise refuse(
                "expires_at", "required: an ISO-8601 timestamp with an offset, e.g. 2027-01-31T12:00:00Z"
            )
        api.expire_one(console, chunk_id, value)
        return f"memory {chunk_id}: expires {value}"

    return await _act(console, request, act)


# ---------------------------------------------------------------------------- records


async def sessions(console: Console, request: Request) -> Response:
    rows = await console.call(console.backend.snapshots.sessions)
    return console.render("sessions.html", sessions=rows)


def _session(console: Console, session_id: str) -> dict[str, Any]:
    calls = console.backend.snapshots.list(session_id)
    if not calls:
        raise refuse("id", f"no prompt snapshots for session {session_id!r}", 404)
    return {
        "session_id": session_id,
        "calls": calls,
        "injections": console.backend.injections.rows(session_id),
    }


async def session(console: Console, request: Request) -> Response:
    session_id = request.query_params.get("id")
    if session_id is None:
        raise refuse("id", "required: the session id (/session?id=...)")
    return console.render("session.html", **await console.call(_session, console, session_id))


async def call(console: Console, request: Request) -> Response:
    session_id, turn, index = api.call_key(dict(request.query_params))
    view = await console.call(call_view, console.backend, console.host, session_id, turn, index)
    return console.render("call.html", view=view, s=view.snapshot)


# ---------------------------------------------------------------------------- preview


async def preview_form(console: Console, request: Request) -> Response:
    return console.render("preview.html", form={}, result=None)


async def preview_run(console: Console, request: Request) -> Response:
    form, _pairs = await form_body(request)
    try:
        options = PreviewOptions.from_form(form)
    except Refusal as exc:
        return console.render("_preview_result.html", exc.status, result=None, error=exc.message)
    result = await console.call(run_preview, console.runtime, options)
    return console.render(
        "_preview_result.html", result=result, error=None, memory_sections=memory_sections(console.host)
    )


# ---------------------------------------------------------------------------- explain


async def explain_page(console: Console, request: Request) -> Response:
    """The explain form, and the verdict once the form says for which turn. With
    ``HX-Target: explain-result`` only the verdict (or the refusal) is returned."""
    params = dict(request.query_params)
    fragment = request.headers.get("hx-target") == "explain-result"
    verdict, error, status = None, None, 200
    if fragment or set(params) - {"memory"}:
        try:
            req = explaining.ExplainRequest.from_params(params)
            verdict = await console.call(explaining.run_explain, console.backend, console.host, req)
        except Refusal as exc:
            error, status = exc.message, exc.status
    context = {
        "verdict": verdict.to_dict() if verdict is not None else None,
        "error": error,
        "form": params,
        "memory_id_keys": explaining.MEMORY_ID_KEYS,
        "turns": await console.call(explaining.recent_turns, console.backend),
    }
    return console.render("_explain_result.html" if fragment else "explain.html", status, **context)


async def home(console: Console, request: Request) -> Response:
    return RedirectResponse("/memory", status_code=303)


ROUTES: list[tuple[str, str, Handler, str]] = [
    ("GET", "/", home, "to the memory review"),
    ("GET", "/memory", memory_list, "the memory review"),
    ("POST", "/memory/bulk", memory_bulk, "confirm or reject the selected rows"),
    ("GET", "/memory/{chunk_id}", memory_detail, "one memory: fields, chain, actions"),
    ("POST", "/memory/{chunk_id}/review", memory_review, "confirm, reject or reset one row"),
    ("POST", "/memory/{chunk_id}/supersede", memory_supersede, "replace one row with new text"),
    ("POST", "/memory/{chunk_id}/expiry", memory_expiry, "set or clear one row's expiry"),
    ("GET", "/sessions", sessions, "sessions with prompt snapshots"),
    ("GET", "/session", session, "one session's model calls and injection log"),
    ("GET", "/call", call, "the prompt inspector: what one model call saw"),
    ("GET", "/preview", preview_form, "the preview form"),
    ("POST", "/preview", preview_run, "run a preview"),
    ("GET", "/explain", explain_page, "explain a memory in a recorded turn or for a query"),
]
