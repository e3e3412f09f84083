"""The OpenAI-compatible HTTP embedder: ``POST {base_url}/embeddings``, sync and native async.

Why this API: OpenAI, Azure OpenAI, Ollama (``http://localhost:11434/v1``), vLLM, LM Studio and
LiteLLM all speak it, so one small client covers the hosted and the self-hosted cases.

What it promises:

- **Batches** of ``batch_size`` texts per request, vectors put back in input order (by the
  ``index`` each item carries), their count and width checked.
- **Bounded time.** ``timeout_s`` per request; 429 and 5xx answers and transport errors
  (refused, reset, timed out) are retried up to ``max_retries`` times with exponential backoff
  and jitter; a ``Retry-After`` is honoured up to ``RETRY_AFTER_CAP_S``, and one asking for
  longer fails at once (a turn must not wait a minute for its query vector). Other 4xx answers
  are not retried: they will not change.
- **The key stays secret.** It is read from the environment variable ``api_key_env`` names,
  lives only in the HTTP clients' headers, and is masked out of every error message (a server
  may echo a request back); logs name the URL and status, never headers.

Every failure is ``EmbedderError``: the store refuses the write it was for, and a turn's search
falls back to full text (the retrieved section records it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Final

import httpx

from contextplane.config import Config
from contextplane.errors import ConfigError, EmbedderError

log = logging.getLogger("contextplane.embedders")

#: The longest ``Retry-After`` honoured; a server asking for longer fails the call at once.
RETRY_AFTER_CAP_S: Final[float] = 10.0
#: Backoff before retry n (0-based): BACKOFF_BASE_S * 2**n, with up to 50% jitter, capped.
BACKOFF_BASE_S: Final[float] = 0.25
BACKOFF_CAP_S: Final[float] = 4.0
_BODY_SHOWN: Final[int] = 200


class _Retry(Exception):
    """One attempt failed in a way worth retrying; ``wait`` is what the server asked for."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


class OpenAIEmbedder:
    """An ``AsyncEmbedder`` for an OpenAI-compatible embeddings endpoint."""

    #: How a synchronous retry waits (a test records the pauses instead).
    _sleep = staticmethod(time.sleep)

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout_s: float = 10.0,
        max_retries: int = 3,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._asked_dimensions = dimensions
        self._dimensions = dimensions
        self._secret: str | None = None
        headers = {"Content-Type": "application/json"}
        if api_key_env:
            key = env.get(api_key_env)
            if not key:
                raise ConfigError(
                    f"embedder.api_key_env names {api_key_env}, which is not set (or empty); export the "
                    "API key in that variable, or drop api_key_env for a server that needs none"
                )
            self._secret = key
            headers["Authorization"] = f"Bearer {key}"
        self._headers = headers
        self._client = httpx.Client(timeout=timeout_s, headers=headers)
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str] | None = None) -> OpenAIEmbedder:
        """The embedder ``[embedder]`` describes (``base_url`` and ``model`` are required)."""
        e = config.embedder
        missing = [k for k in ("base_url", "model") if not getattr(e, k)]
        if missing:
            raise ConfigError(
                f'embedder.provider = "openai" needs embedder.{missing[0]} (e.g. base_url = '
                f'"http://localhost:11434/v1", model = "nomic-embed-text") (in {config.source})'
            )
        assert e.base_url is not None and e.model is not None
        return cls(
            base_url=e.base_url,
            model=e.model,
            api_key_env=e.api_key_env,
            dimensions=e.dimensions,
            batch_size=e.batch_size,
            timeout_s=e.timeout_s,
            max_retries=e.max_retries,
            environ=environ,
        )

    def __repr__(self) -> str:
        return f"<OpenAIEmbedder {self.name} at {self.base_url}>"

    @property
    def name(self) -> str:
        """The vector space's identity the store records: provider and model."""
        return f"openai:{self.model}"

    @property
    def dimensions(self) -> int:
        """The configured width, else the model's, asked of the server once (one short text)."""
        if self._dimensions is None:
            with self._lock:
                if self._dimensions is None:
                    self._dimensions = len(self._request_sync(["dimensions"])[0])
        return self._dimensions

    # --------------------------------------------------------------------- public calls

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, ``batch_size`` texts per request."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._checked(self._request_sync(list(texts[start : start + self.batch_size]))))
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` on the event loop (httpx's async client; nothing blocks the loop)."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            out.extend(self._checked(await self._request_async(batch)))
        return out

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        client = self._aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    # --------------------------------------------------------------------- one request

    def _payload(self, batch: list[str]) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._asked_dimensions is not None:
            payload["dimensions"] = self._asked_dimensions
        return payload

    def _request_sync(self, batch: list[str]) -> list[list[float]]:
        url = f"{self.base_url}/embeddings"
        for attempt in range(self.max_retries + 1):
            try:
                response = self._client.post(url, json=self._payload(batch))
                return self._vectors(response, len(batch))
            except httpx.TransportError as exc:
                retry = _Retry(_transport(exc, self.timeout_s))
            except _Retry as exc:
                retry = exc
            self._sleep(self._pause(retry, attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _request_async(self, batch: list[str]) -> list[list[float]]:
        url = f"{self.base_url}/embeddings"
        client = self._aclient()
        for attempt in range(self.max_retries + 1):
            try:
                response = await client.post(url, json=self._payload(batch))
                return self._vectors(response, len(batch))
            except httpx.TransportError as exc:
                retry = _Retry(_transport(exc, self.timeout_s))
            except _Retry as exc:
                retry = exc
            await asyncio.sleep(self._pause(retry, attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _aclient(self) -> httpx.AsyncClient:
        # An async client's connections belong to the loop that opened them: one per loop.
        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None:
            client = httpx.AsyncClient(timeout=self.timeout_s, headers=self._headers)
            self._aclients[loop] = client
        return client

    def _pause(self, retry: _Retry, attempt: int) -> float:
        """How long to wait before the next attempt; raise when there is none."""
        if attempt >= self.max_retries:
            tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
            raise self._error(f"{retry.reason} (gave up after {tries})")
        if retry.wait is not None:
            if retry.wait > RETRY_AFTER_CAP_S:
                raise self._error(
                    f"{retry.reason}; the server asked to retry after {retry.wait:g}s, longer than the "
                    f"{RETRY_AFTER_CAP_S:g}s a call may wait"
                )
            pause = retry.wait
        else:
            pause = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt) * (1 + random.random() / 2)
        log.info("embedder %s: %s; retrying in %.2fs", self.name, self._mask(retry.reason), pause)
        return pause

    def _vectors(self, response: httpx.Response, expected: int) -> list[list[float]]:
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retry(f"HTTP {status}{self._body(response)}", _retry_after(response))
        if status >= 400:
            raise self._error(
                f"HTTP {status}{self._body(response)}; check the model name, the key and the URL"
            )
        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda item: int(item.get("index", 0)))
            vectors = [[float(x) for x in item["embedding"]] for item in ordered]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise self._error(
                f"the answer is not an OpenAI embeddings response ({type(exc).__name__}); is base_url "
                "the API root, ending in /v1?"
            ) from None
        if len(vectors) != expected:
            raise self._error(f"returned {len(vectors)} vectors for {expected} texts")
        return vectors

    def _checked(self, vectors: list[list[float]]) -> list[list[float]]:
        dims = self.dimensions
        for vector in vectors:
            if len(vector) != dims:
                raise self._error(
                    f"returned a {len(vector)}-dimension vector, expected {dims}; set embedder.dimensions "
                    "to what the model produces, or rebuild with `contextplane memory reindex --rebuild`"
                )
        return vectors

    def _body(self, response: httpx.Response) -> str:
        text = " ".join(response.text.split())[:_BODY_SHOWN]
        return f": {text}" if text else ""

    def _mask(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _error(self, what: str) -> EmbedderError:
        return EmbedderError(self._mask(f"embedder {self.name} at {self.base_url}: {what}"))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _transport(exc: httpx.TransportError, timeout_s: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout_s:g}s (embedder.timeout_s)"
    return f"{type(exc).__name__}: {exc}"
