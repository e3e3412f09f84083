"""The embedder protocol: what the one-winner ``contextplane_embedder`` hook must return.

Kept in its own module so stores can depend on it without importing the plugin host. An
embedder may add ``aembed`` (``AsyncEmbedder``); async callers go through ``aembed(embedder,
texts)``, which falls back to ``embed`` in a worker thread, so every embedder works on both
paths and only the ones with a native async form need one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from contextplane.errors import EmbedderError

#: The one line ``memory search`` and ``preview`` print when no embedder is configured.
FULL_TEXT_ONLY = (
    "full-text search only: no embedder is configured (set [embedder] provider and model for "
    "semantic retrieval; see README, 'Semantic retrieval')"
)

#: "The embedder the configuration names" (``PluginHost.backend``, ``open_backend``), as
#: opposed to None, which asks for full text only.
CONFIGURED: Any = object()


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-width float vectors. ``dimensions`` never changes for one instance."""

    @property
    def dimensions(self) -> int: ...

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text. A list of lists, or a 2-D numpy array (texts x dimensions),
        which the embedded store packs in one call instead of float by float."""
        ...


@runtime_checkable
class AsyncEmbedder(Embedder, Protocol):
    """An ``Embedder`` that can also embed without blocking an event loop (a remote embedding
    service, a model server): ``aembed`` returns what ``embed`` would for the same texts."""

    async def aembed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


async def aembed(embedder: Embedder, texts: Sequence[str]) -> Sequence[Sequence[float]]:
    """``texts`` embedded off the event loop: the embedder's own ``aembed`` when it has one, else
    its ``embed`` in a worker thread (a local model is CPU work that would stall the loop)."""
    native = getattr(embedder, "aembed", None)
    if native is not None:
        vectors: Sequence[Sequence[float]] = await native(texts)
        return vectors
    return await asyncio.to_thread(embedder.embed, texts)


def embedder_failed(embedder: Embedder, exc: BaseException) -> EmbedderError:
    """``exc`` as the one error a store raises for a failed embedding (``EmbedderError``)."""
    if isinstance(exc, EmbedderError):
        return exc
    return EmbedderError(f"embedder {embedder.name!r} failed: {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def refused_write() -> Iterator[None]:
    """Around a write's embedding, before anything is written: a failed embedding refuses the
    whole write (never a row stored without its vector beside rows with one), and says so."""
    try:
        yield
    except EmbedderError as exc:
        raise EmbedderError(
            f"{exc}; the write was refused and nothing was stored: retry when the embedder answers"
        ) from exc
