"""Embedders that ship: the ``embedder`` hook answered from ``[embedder]`` in the configuration.

Two providers, each behind its own extra and imported only when the configuration names it:

- ``provider = "openai"`` (``pip install 'contextplane[openai]'``): any server speaking the
  OpenAI embeddings API (``POST {base_url}/embeddings``): OpenAI, Azure OpenAI, Ollama, vLLM,
  LM Studio, LiteLLM. ``contextplane_embedders.openai_compat``.
- ``provider = "sentence-transformers"`` (``pip install 'contextplane[local]'``): a local
  sentence-transformers model, by name or directory, on the CPU unless ``device`` says
  otherwise. ``contextplane_embedders.local``.

A third party adds a provider the same way: a plugin whose ``embedder(config)`` returns an
``Embedder`` when ``config.embedder.provider`` names it, and None otherwise.
"""

from __future__ import annotations

from contextplane.errors import EmbedderError

__all__ = ["EmbedderError"]
