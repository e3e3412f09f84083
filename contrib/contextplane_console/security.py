"""What stands between the console and anyone who is not its operator (issue 15, "Security").

One ASGI middleware, in front of every route and static file:

- **Where it listens.** On a loopback address the console answers only requests whose
  ``Host`` is a loopback name, so a web page that rebinds its own DNS name to 127.0.0.1 cannot
  read it. Anywhere else it requires the access **token** on every request: an
  ``Authorization: Bearer`` header, or the cookie the printed ``/?token=...`` link sets (the
  link redirects at once, so the token leaves the address bar and the history).
- **Cross-site request forgery.** Every state-changing request must be same-origin: its
  ``Origin`` (when sent) must be the console's own, its ``Sec-Fetch-Site`` (when sent) must be
  ``same-origin``, and it must carry the per-process CSRF token in ``X-CSRF-Token``. Pages
  carry that token for htmx; other clients read it from ``GET /api/csrf``, which a page of
  another origin cannot read (the console sends no CORS headers).
- **Headers.** A strict Content-Security-Policy (scripts only from the console itself, no
  inline script, no plugins, no framing) on every response: memory text is untrusted, and it
  is HTML-escaped where it is rendered; the policy is a second wall, not the first.
- **Logs.** One line per request on ``contextplane.console``: method, path (never the query
  string, which may hold the token), status and time. Tokens are never logged.
"""

from __future__ import annotations

import hmac
import html
import ipaddress
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode

log = logging.getLogger("contextplane.console")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS: Final[frozenset[str]] = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_HEADER: Final[str] = "x-csrf-token"

CONTENT_SECURITY_POLICY: Final[str] = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final[tuple[tuple[bytes, bytes], ...]] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (127.0.0.0/8, ::1)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8765`` -> ``::1``)."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")].lower() if "]" in host_header else ""
    return host_header.rsplit(":", 1)[0].lower() if host_header.count(":") == 1 else host_header.lower()


def _same(secret: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(secret.encode(), given.encode())


class Guard:
    """The security middleware (see the module docstring). ``token`` None means the console
    listens on loopback and needs none; ``cookie_name`` is per port, so two consoles on one
    machine do not overwrite each other's cookie."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        csrf_token: str,
        token: str | None,
        loopback_only: bool,
        cookie_name: str = "contextplane_console",
    ) -> None:
        self.app = app
        self.csrf_token = csrf_token
        self.token = token
        self.loopback_only = loopback_only
        self.cookie_name = cookie_name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status_seen: list[int] = []

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_seen.append(int(message["status"]))
                headers = list(message.get("headers", []))
                headers.extend(SECURITY_HEADERS)
                elapsed = (time.perf_counter() - started) * 1000
                headers.append((b"server-timing", f"app;dur={elapsed:.2f}".encode()))
                message["headers"] = headers
            await send(message)

        try:
            refusal = self._check(scope)
            if refusal is not None:
                await _refuse(scope, send_with_headers, *refusal)
            elif self._token_in_query(scope):
                await self._accept_link(scope, send_with_headers)
            else:
                await self.app(scope, receive, send_with_headers)
        finally:
            log.info(
                "%s %s %s %.1fms",
                scope.get("method", "?"),
                scope.get("path", "?"),
                status_seen[0] if status_seen else "-",
                (time.perf_counter() - started) * 1000,
            )

    def _headers(self, scope: Scope) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in scope.get("headers", []):
            out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        return out

    def _check(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = self._headers(scope)
        host = headers.get("host", "")
        if self.loopback_only and not is_loopback(_host_name(host)):
            return (
                403,
                "Host",
                f"Host: {host!r} is not a loopback name; this console listens on loopback only "
                "(open it as http://127.0.0.1:<port>/)",
            )
        if self.token is not None and not self._authorized(scope, headers):
            return (
                401,
                "token",
                "token: this console needs its access token; open the link printed when it started "
                "(http://<host>:<port>/?token=...) or send 'Authorization: Bearer <token>'",
            )
        if scope.get("method", "GET") not in SAFE_METHODS:
            return self._same_origin(scope, headers)
        return None

    def _authorized(self, scope: Scope, headers: dict[str, str]) -> bool:
        assert self.token is not None
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and _same(self.token, auth[7:].strip()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            return False
        morsel = cookie.get(self.cookie_name)
        if morsel is not None and _same(self.token, morsel.value):
            return True
        return self._token_in_query(scope)

    def _token_in_query(self, scope: Scope) -> bool:
        """The printed link's ``?token=`` (pages only: API clients send the header)."""
        if self.token is None or scope.get("method") not in SAFE_METHODS:
            return False
        if str(scope.get("path", "")).startswith("/api"):
            return False
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        return _same(self.token, query.get("token"))

    def _same_origin(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"
        origin = headers.get("origin")
        if origin is not None and origin != own:
            return (
                403,
                "Origin",
                f"Origin: cross-origin request refused ({origin!r} is not this console's origin {own!r})",
            )
        site = headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            return (403, "Sec-Fetch-Site", f"Sec-Fetch-Site: cross-site request refused ({site!r})")
        if not _same(self.csrf_token, headers.get(CSRF_HEADER)):
            return (
                403,
                "X-CSRF-Token",
                "X-CSRF-Token: missing or wrong; state-changing requests must send the console's CSRF "
                "token (in every page's <meta name=\"csrf-token\">, or from GET /api/csrf)",
            )
        return None

    async def _accept_link(self, scope: Scope, send: Send) -> None:
        """The printed link: set the token cookie and redirect to the same URL without it."""
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        query = [(k, v) for k, v in pairs if k != "token"]
        location = same_site_path(str(scope.get("path", "/"))) + (f"?{urlencode(query)}" if query else "")
        assert self.token is not None
        cookie = f"{self.cookie_name}={self.token}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def same_site_path(path: str) -> str:
    """``path`` as a redirect target that stays on this console: one leading slash (``//host/x``
    would send the browser, and the token's cookie question, to another site) and every other
    character percent-encoded (a backslash reads as a slash to browsers; CR/LF would split the
    header)."""
    return "/" + quote(path.lstrip("/\\"), safe="/:@!$&'()*+,;=-._~", errors="replace")


async def _refuse(scope: Scope, send: Send, status: int, field: str, message: str) -> None:
    """A refusal: JSON for the API (and for htmx), plain text for a page."""
    path = str(scope.get("path", ""))
    if path.startswith("/api"):
        body = json.dumps({"error": message, "field": field}).encode()
        kind = b"application/json"
    elif any(k.lower() == b"hx-request" for k, _ in scope.get("headers", [])):  # swapped into a page
        body = f'<p class="error" role="alert">{html.escape(message)}</p>'.encode()
        kind = b"text/html; charset=utf-8"
    else:
        body = message.encode()
        kind = b"text/plain; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
