"""A real OpenAI-compatible embeddings server for the tests: Starlette served by uvicorn in a
thread on 127.0.0.1 (an ephemeral port), with behaviour the test scripts per request.

Vectors are deterministic (hashed bag of words, so texts sharing words are near each other and
hybrid search means something); ``script`` holds what the next requests do ("ok", "429",
"429:<retry-after>", "500", "502", "503", "400", "wrong_dims", "hang", "echo_key"), consumed one per
request, then ``default``. Every request is recorded (its batch, its Authorization header).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import attrs
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_WORD = re.compile(r"\w+")

#: The longest a "hang" holds a request (bounded, so the server always stops by itself).
HANG_S = 5.0


def vector(text: str, dims: int) -> list[float]:
    out = [0.0] * dims
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        out[int.from_bytes(digest[:4], "little") % dims] += 1.0 if digest[4] & 1 else -1.0
    norm = sum(x * x for x in out) ** 0.5 or 1.0
    return [x / norm for x in out]


@attrs.define
class Seen:
    batch: list[str]
    authorization: str | None
    model: str
    dimensions: int | None


@attrs.define
class Behaviour:
    dims: int = 16
    script: list[str] = attrs.field(factory=list)
    default: str = "ok"
    latency_s: float = 0.0
    seen: list[Seen] = attrs.field(factory=list)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def next(self) -> str:
        with self.lock:
            return self.script.pop(0) if self.script else self.default


class EmbeddingServer:
    def __init__(self) -> None:
        self.behaviour = Behaviour()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def app(self) -> Starlette:
        async def embeddings(request: Request) -> Response:
            behaviour = self.behaviour  # read per request: each test gets a fresh one
            body: dict[str, Any] = await request.json()
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            auth = request.headers.get("authorization")
            behaviour.seen.append(Seen(list(texts), auth, body.get("model", ""), body.get("dimensions")))
            if behaviour.latency_s:
                await asyncio.sleep(behaviour.latency_s)
            what = behaviour.next()
            if what.startswith("429"):
                _, _, after = what.partition(":")
                headers = {"Retry-After": after} if after else {}
                return JSONResponse({"error": {"message": "rate limited"}}, status_code=429, headers=headers)
            if what in ("500", "502", "503"):
                return JSONResponse({"error": {"message": "model crashed"}}, status_code=int(what))
            if what == "400":
                return JSONResponse({"error": {"message": "unknown model"}}, status_code=400)
            if what == "echo_key":  # a careless server that echoes the request back in its error
                return JSONResponse({"error": {"message": f"bad request, you sent {auth}"}}, status_code=503)
            if what == "hang":
                await asyncio.sleep(HANG_S)
            dims = body.get("dimensions") or behaviour.dims
            if what == "wrong_dims":
                dims = dims + 3
            data = [
                {"object": "embedding", "index": i, "embedding": vector(t, dims)} for i, t in enumerate(texts)
            ]
            data.reverse()  # servers may answer out of order: the client must sort by index
            return JSONResponse({"object": "list", "data": data, "model": body.get("model", "")})

        return Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"])])

    def start(self) -> None:
        config = uvicorn.Config(
            self.app(), host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="embedding-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test embedding server did not start on 127.0.0.1")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=HANG_S + 5)


def serving() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
