"""The ``embedder`` hook for the shipped providers (registered through the ``contextplane``
entry-point group). It imports a provider's module, and with it httpx or sentence-transformers,
only when ``[embedder] provider`` names that provider, so an installation without the extras
loads this plugin at no cost."""

from __future__ import annotations

from typing import Any

from contextplane import hookimpl
from contextplane.config import Config
from contextplane.errors import ConfigError

OPENAI = "openai"
LOCAL = "sentence-transformers"


def _missing(extra: str, exc: ImportError, provider: str) -> ConfigError:
    return ConfigError(
        f'embedder.provider = "{provider}" needs the {extra} extra ({exc}); install it with '
        f"pip install 'contextplane[{extra}]'"
    )


@hookimpl
def embedder(config: Config) -> Any:
    provider = config.embedder.provider
    if provider == OPENAI:
        try:
            from contextplane_embedders.openai_compat import OpenAIEmbedder
        except ImportError as exc:
            raise _missing("openai", exc, provider) from None
        return OpenAIEmbedder.from_config(config)
    if provider == LOCAL:
        from contextplane_embedders.local import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder.from_config(config)
    return None
