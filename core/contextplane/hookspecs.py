"""Hook specifications: the whole plugin contract, one line of docstring each.

Hooks take keyword arguments only; an implementation may accept any subset of them.
The reference with examples is docs/hooks.md.
"""

from __future__ import annotations

from collections.abc import Callable

from contextplane.config import Config
from contextplane.embedding import Embedder
from contextplane.markers import PROJECT as PROJECT
from contextplane.markers import hookimpl as hookimpl
from contextplane.markers import hookspec
from contextplane.records.backend import Backend
from contextplane.request import ProjectionRequest
from contextplane.sections import ContextSection, PromptSection
from contextplane.store.protocol import KnowledgeStore
from contextplane.types import ModelCall, ProjectedContext, StablePrefix


@hookspec
def register_prompt_sections(register: Callable[[PromptSection], None], config: Config) -> None:
    """Register stable-prefix sections by calling ``register(PromptSection(...))``."""


@hookspec
def register_context_sections(register: Callable[[ContextSection], None], config: Config) -> None:
    """Register projected-context sections by calling ``register(ContextSection(...))``."""


@hookspec(firstresult=True)
def backend(config: Config, embedder: Embedder | None) -> Backend | None:
    """Return the ``Backend`` holding every record (memories, summaries, injections, snapshots), or None;
    its memory store embeds with ``embedder`` (the configured ``Embedder``, or None: full text)."""


@hookspec(firstresult=True)
def knowledge_store(config: Config) -> KnowledgeStore | None:
    """Return the memory store for the embedded backend, or None to let another plugin (or SQLite) decide."""


@hookspec(firstresult=True)
def embedder(config: Config) -> Embedder | None:
    """Return the ``Embedder`` ``[embedder] provider`` names (None when it names another one)."""


@hookspec
def observe_projection(projection: ProjectedContext, request: ProjectionRequest) -> None:
    """Receive every recorded ``ProjectedContext`` (never an incognito one) after it is composed."""


@hookspec
def observe_model_call(call: ModelCall, request: ProjectionRequest) -> None:
    """Receive every ``ModelCall`` a projection is delivered to (incognito ones too, flagged)."""


@hookspec
def observe_stable_prefix(prefix: StablePrefix, config: Config) -> None:
    """Receive every composed ``StablePrefix``."""
