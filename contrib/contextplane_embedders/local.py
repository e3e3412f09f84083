"""The local embedder: a sentence-transformers model, by hub name or directory, no network at
run time once it is on disk.

``SentenceTransformer(model_name_or_path, device=...)`` loads it (CPU unless
``embedder.device`` says otherwise); ``encode`` embeds ``batch_size`` texts per forward pass
and returns one float32 matrix, which the embedded store packs in one call. Vectors are
normalised, so cosine similarity is their dot product on every backend.

sentence-transformers (and torch) are imported when the first embedder is made, never when the
plugin loads: ``contextplane plugins`` stays fast without the ``local`` extra.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from contextplane.config import Config
from contextplane.errors import ConfigError, EmbedderError


class SentenceTransformerEmbedder:
    """An ``Embedder`` over one loaded sentence-transformers model."""

    def __init__(
        self, model: str, *, device: str = "cpu", batch_size: int = 64, dimensions: int | None = None
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(
                f'embedder.provider = "sentence-transformers" needs the local extra ({exc}); install it '
                "with pip install 'contextplane[local]'"
            ) from None
        self.model_name = model
        self.batch_size = batch_size
        try:
            self._model = SentenceTransformer(model, device=device)
        except Exception as exc:  # a missing directory, no network for a hub name, bad files
            raise ConfigError(
                f"embedder.model = {model!r}: the sentence-transformers model could not be loaded "
                f"({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); give a directory holding a "
                "saved model, or a hub name already in the local cache"
            ) from None
        # sentence-transformers 5 renamed the method; 3 and 4 have only the old name
        width_of = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        width = width_of()
        if not isinstance(width, int) or width < 1:
            raise ConfigError(f"embedder.model = {model!r}: the model does not say its embedding width")
        if dimensions is not None and dimensions != width:
            raise ConfigError(
                f"embedder.dimensions = {dimensions}, but the model {model!r} produces {width}-dimension "
                "vectors; set dimensions to that, or remove it"
            )
        self._dimensions = width
        # One forward pass at a time: torch already uses every core for one batch, and two
        # interleaved passes only thrash.
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Config) -> SentenceTransformerEmbedder:
        e = config.embedder
        if not e.model:
            raise ConfigError(
                'embedder.provider = "sentence-transformers" needs embedder.model (a model directory or '
                f'a hub name, e.g. "sentence-transformers/all-MiniLM-L6-v2") (in {config.source})'
            )
        return cls(e.model, device=e.device, batch_size=e.batch_size, dimensions=e.dimensions)

    def __repr__(self) -> str:
        return f"<SentenceTransformerEmbedder {self.name} ({self._dimensions} dimensions)>"

    @property
    def name(self) -> str:
        """The vector space's identity the store records: provider and model."""
        return f"sentence-transformers:{self.model_name}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> Any:
        """A (texts x dimensions) float32 matrix, unit-length rows."""
        try:
            with self._lock:
                return self._model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise EmbedderError(
                f"embedder {self.name}: encoding failed ({type(exc).__name__}: {exc})"
            ) from exc
