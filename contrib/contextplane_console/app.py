"""The console's ASGI application: the routes of the pages and the JSON API, and the guard.

``create_app`` is what the command, the tests and the benchmark call. The backend is used from
worker threads, one call at a time (``Console.call``): the embedded backend's record tables
each hold one connection, and a console has one operator, so serialising costs nothing a
person would notice and rules out two requests sharing a connection.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from contextplane import Backend, ContextPlaneError, PluginHost, StoreError
from contextplane.notices import log_failure
from contextplane.observability.snapshots import snapshot_time
from contextplane.runtime import Runtime
from contextplane_console import api, explaining, lineage, pages
from contextplane_console.errors import Refusal
from contextplane_console.memories import lifecycle_state
from contextplane_console.security import Guard

log = logging.getLogger("contextplane.console")

HERE = Path(__file__).resolve().parent
T = TypeVar("T")


class Console:
    """What every route needs: the backend, the plugin host, the templates and the CSRF token."""

    def __init__(
        self, backend: Backend, host: PluginHost, *, csrf_token: str, reviewer: str = "console"
    ) -> None:
        self.backend = backend
        self.host = host
        #: The wiring the preview composes with (nothing recorded; the backend is handed in).
        self.runtime = Runtime(host=host, backend=backend)
        self.csrf_token = csrf_token
        #: Who the history says made the console's changes (``by`` of review and expiry events).
        self.reviewer = reviewer
        self._lock = threading.Lock()
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every value is HTML-escaped: memory text is untrusted
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["lifecycle"] = lambda chunk: lifecycle_state(chunk)
        self.templates.filters["when"] = _when
        self.templates.filters["snapshot_time"] = snapshot_time
        self.templates.filters["short"] = lambda sha: (sha or "-")[:12]
        self.templates.filters["change"] = lineage.change
        self.templates.filters["id_links"] = lineage.detail_links
        self.templates.tests["record_list"] = explaining.is_record_list
        self.templates.globals["columns"] = explaining.columns
        self.templates.globals["csrf_token"] = csrf_token
        self.templates.globals["backend_name"] = backend.name

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on a worker thread, one backend call at a time."""

        def locked() -> T:
            with self._lock:
                return fn(*args, **kwargs)

        return await run_in_threadpool(locked)

    def render(self, name: str, code: int = 200, /, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.templates.get_template(name).render(**context), status_code=code)


def _when(value: Any) -> str:
    """A timestamp for people: ``2027-01-31 12:00:00Z`` (ISO text or a datetime)."""
    if value is None:
        return "-"
    text = value if isinstance(value, str) else value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return text.replace("T", " ")[:19] + "Z"


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api")


def _error_response(console: Console, request: Request, status: int, field: str, message: str) -> Response:
    if _wants_json(request):
        return JSONResponse({"error": message, "field": field}, status_code=status)
    if request.headers.get("hx-request"):
        return console.render("_flash.html", status, error=message)
    return console.render("error.html", status, status=status, error=message)


def create_app(
    backend: Backend,
    host: PluginHost,
    *,
    token: str | None = None,
    loopback_only: bool = True,
    csrf_token: str | None = None,
    cookie_name: str = "contextplane_console",
    reviewer: str = "console",
) -> Guard:
    """The console over ``backend``. ``token`` is required unless ``loopback_only``: a console
    reachable from other machines without one would hand the memory store to anyone. ``reviewer``
    is who the memory history records as making the console's reviews and expiry changes."""
    if token is None and not loopback_only:
        raise ValueError("token: a console that listens beyond loopback needs an access token")
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise ValueError(f"reviewer: who the history records for the console's changes, got {reviewer!r}")
    console = Console(
        backend, host, csrf_token=csrf_token or secrets.token_urlsafe(32), reviewer=reviewer.strip()
    )

    def bind(handler: Callable[[Console, Request], Any]) -> Callable[[Request], Any]:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            try:
                response: Response = await handler(console, request)
                return response
            except Refusal as exc:
                return _error_response(console, request, exc.status, exc.field, exc.message)
            except StoreError as exc:
                return _error_response(console, request, 409, "id", str(exc))
            except ContextPlaneError as exc:  # a core ValidationError names its field first
                text = str(exc)
                field = text.split(":", 1)[0] if ":" in text else "request"
                return _error_response(console, request, 400, field, text)
            except Exception as exc:  # a bug: one logged traceback, and a page that says so
                log_failure(
                    log, ("console", request.url.path, type(exc).__name__), "console: %s failed",
                    request.url.path, exc=exc,
                )
                message = f"server: internal error ({type(exc).__name__}); see the log"
                return _error_response(console, request, 500, "server", message)

        return endpoint

    routes: list[BaseRoute] = [
        Route(path, bind(fn), methods=[method]) for method, path, fn, _doc in api.ROUTES + pages.ROUTES
    ]
    routes.append(Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        what = "path" if exc.status_code == 404 else "method"
        message = (
            f"path: no such page or endpoint {request.url.path!r} (the API's endpoints: GET /api)"
            if exc.status_code == 404
            else f"method: {request.method} is not allowed on {request.url.path}"
        )
        return _error_response(console, request, exc.status_code, what, message)

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.state.console = console
    return Guard(
        app, csrf_token=console.csrf_token, token=token, loopback_only=loopback_only, cookie_name=cookie_name
    )
