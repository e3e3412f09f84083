"""The embedder protocol: what the one-winner ``contextplane_embedder`` hook must return.

Kept in its own module so stores can depend on it without importing the plugin host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


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
