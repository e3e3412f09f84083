"""The store and backend author's face: the protocols a deployment's records implement, the
toolkit they are written with, and the reference implementation to read or extend.

Why a face of its own: a backend author should find the whole contract in one module, not in
the 22 core names (internals included) a backend imported before. Lazy like the root package
(PEP 562): ``import contextplane.backend`` loads no submodule, and each name loads only the
module that defines it (the store protocols do load the embedded store's package). Each name is
the very object its defining module holds.

* the protocols: ``KnowledgeStore`` (memories) and ``AsyncKnowledgeStore``, the optional
  ``MemoryHistory``, ``ExactRestore`` and ``StoreCheck``; ``Backend``, which bundles them with
  ``SessionSummaries``, ``InjectionLog``, ``SnapshotStore`` and ``TurnInputStore`` (and their
  ``Async*`` forms: ``AsyncSessionSummaries``, ``AsyncInjectionLog``, ``AsyncSnapshotStore``,
  ``AsyncTurnInputStore``); ``Embedder``, ``AsyncEmbedder``;
* the rows they hold: ``MemoryChunk``, ``SearchHit``, ``SessionSummary``, ``InjectionRow``,
  ``SnapshotRow``, ``PromptSnapshot``, ``TurnInputs``; the lifecycle history's
  ``HistoryEvent``, ``HistoryPosition``, ``HISTORY_START``;
* the write spec (``contextplane.backends.spec``): ``ChunkWrites`` gives a store ``add_chunk``
  and ``add_chunks`` over its own ``_write``; ``validate_write`` (with ``check_fields``,
  ``stamped``, ``ValidWrite``, ``KEYWORDS``, ``WRITE_FIELDS``, ``TEXT_FIELDS``) checks and
  stamps a row as every store does; ``validate_summary``, ``decode_snapshot``;
* consolidation on write (ADR D7), the rules every store applies: ``Consolidation``,
  ``WriteOutcome``, ``Outcome``, ``near_duplicates``, ``current_head``, ``normalise_content``;
* offering a backend: the one-winner ``backend`` hook (``hookimpl``, ``Config``: the plugin
  answers when ``[store] backend`` names it); ``register_backend`` (call it when the backend is
  built: a caller that hands composition only the memory store still gets this backend's
  records), ``backend_of``, ``check_backend`` (what keeps an object from being a backend);
* the in-memory reference backend: ``InMemoryBackend``, ``InMemoryKnowledgeStore``,
  ``InMemorySessionSummaries``, ``InMemoryInjectionLog``, ``InMemorySnapshotStore``;
* the errors a store raises: ``StoreError``, ``ValidationError``, ``EmbedderError``.

The kit (``contextplane.testing``: ``KnowledgeStoreConformance``, ``BackendConformance``) checks
a store and a backend against these contracts. CONTRIBUTING.md ("The three faces") has an
example that runs as a test.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and IDEs see; at run time __getattr__ loads each on first use
    from contextplane.backends.memory import (
        InMemoryBackend,
        InMemoryInjectionLog,
        InMemoryKnowledgeStore,
        InMemorySessionSummaries,
        InMemorySnapshotStore,
    )
    from contextplane.backends.spec import (
        KEYWORDS,
        TEXT_FIELDS,
        WRITE_FIELDS,
        ChunkWrites,
        ValidWrite,
        check_fields,
        stamped,
        validate_write,
    )
    from contextplane.config import Config
    from contextplane.embedding import AsyncEmbedder, Embedder
    from contextplane.errors import EmbedderError, StoreError, ValidationError
    from contextplane.markers import hookimpl
    from contextplane.memory.consolidation import (
        Consolidation,
        Outcome,
        WriteOutcome,
        current_head,
        near_duplicates,
        normalise_content,
    )
    from contextplane.memory.history import HISTORY_START, HistoryEvent, HistoryPosition
    from contextplane.memory.model import MemoryChunk
    from contextplane.records import (
        AsyncInjectionLog,
        AsyncSessionSummaries,
        AsyncSnapshotStore,
        AsyncTurnInputStore,
        Backend,
        InjectionLog,
        InjectionRow,
        PromptSnapshot,
        SessionSummaries,
        SessionSummary,
        SnapshotRow,
        SnapshotStore,
        TurnInputs,
        TurnInputStore,
        backend_of,
        check_backend,
        decode_snapshot,
        register_backend,
        validate_summary,
    )
    from contextplane.store.protocol import (
        AsyncKnowledgeStore,
        ExactRestore,
        KnowledgeStore,
        MemoryHistory,
        SearchHit,
        StoreCheck,
    )

#: Where each name is defined (the imports above, as data for ``__getattr__``).
_WHERE: dict[str, str] = {
    "AsyncEmbedder": "contextplane.embedding",
    "AsyncInjectionLog": "contextplane.records",
    "AsyncKnowledgeStore": "contextplane.store.protocol",
    "AsyncSessionSummaries": "contextplane.records",
    "AsyncSnapshotStore": "contextplane.records",
    "AsyncTurnInputStore": "contextplane.records",
    "Backend": "contextplane.records",
    "ChunkWrites": "contextplane.backends.spec",
    "Config": "contextplane.config",
    "Consolidation": "contextplane.memory.consolidation",
    "Embedder": "contextplane.embedding",
    "EmbedderError": "contextplane.errors",
    "ExactRestore": "contextplane.store.protocol",
    "HISTORY_START": "contextplane.memory.history",
    "HistoryEvent": "contextplane.memory.history",
    "HistoryPosition": "contextplane.memory.history",
    "InMemoryBackend": "contextplane.backends.memory",
    "InMemoryInjectionLog": "contextplane.backends.memory",
    "InMemoryKnowledgeStore": "contextplane.backends.memory",
    "InMemorySessionSummaries": "contextplane.backends.memory",
    "InMemorySnapshotStore": "contextplane.backends.memory",
    "InjectionLog": "contextplane.records",
    "InjectionRow": "contextplane.records",
    "KEYWORDS": "contextplane.backends.spec",
    "KnowledgeStore": "contextplane.store.protocol",
    "MemoryChunk": "contextplane.memory.model",
    "MemoryHistory": "contextplane.store.protocol",
    "Outcome": "contextplane.memory.consolidation",
    "PromptSnapshot": "contextplane.records",
    "SearchHit": "contextplane.store.protocol",
    "SessionSummaries": "contextplane.records",
    "SessionSummary": "contextplane.records",
    "SnapshotRow": "contextplane.records",
    "SnapshotStore": "contextplane.records",
    "StoreCheck": "contextplane.store.protocol",
    "StoreError": "contextplane.errors",
    "TEXT_FIELDS": "contextplane.backends.spec",
    "TurnInputStore": "contextplane.records",
    "TurnInputs": "contextplane.records",
    "ValidWrite": "contextplane.backends.spec",
    "ValidationError": "contextplane.errors",
    "WRITE_FIELDS": "contextplane.backends.spec",
    "WriteOutcome": "contextplane.memory.consolidation",
    "backend_of": "contextplane.records",
    "check_backend": "contextplane.records",
    "check_fields": "contextplane.backends.spec",
    "current_head": "contextplane.memory.consolidation",
    "decode_snapshot": "contextplane.records",
    "hookimpl": "contextplane.markers",
    "near_duplicates": "contextplane.memory.consolidation",
    "normalise_content": "contextplane.memory.consolidation",
    "register_backend": "contextplane.records",
    "stamped": "contextplane.backends.spec",
    "validate_summary": "contextplane.records",
    "validate_write": "contextplane.backends.spec",
}

__all__ = [
    "HISTORY_START",
    "KEYWORDS",
    "TEXT_FIELDS",
    "WRITE_FIELDS",
    "AsyncEmbedder",
    "AsyncInjectionLog",
    "AsyncKnowledgeStore",
    "AsyncSessionSummaries",
    "AsyncSnapshotStore",
    "AsyncTurnInputStore",
    "Backend",
    "ChunkWrites",
    "Config",
    "Consolidation",
    "Embedder",
    "EmbedderError",
    "ExactRestore",
    "HistoryEvent",
    "HistoryPosition",
    "InMemoryBackend",
    "InMemoryInjectionLog",
    "InMemoryKnowledgeStore",
    "InMemorySessionSummaries",
    "InMemorySnapshotStore",
    "InjectionLog",
    "InjectionRow",
    "KnowledgeStore",
    "MemoryChunk",
    "MemoryHistory",
    "Outcome",
    "PromptSnapshot",
    "SearchHit",
    "SessionSummaries",
    "SessionSummary",
    "SnapshotRow",
    "SnapshotStore",
    "StoreCheck",
    "StoreError",
    "TurnInputStore",
    "TurnInputs",
    "ValidWrite",
    "ValidationError",
    "WriteOutcome",
    "backend_of",
    "check_backend",
    "check_fields",
    "current_head",
    "decode_snapshot",
    "hookimpl",
    "near_duplicates",
    "normalise_content",
    "register_backend",
    "stamped",
    "validate_summary",
    "validate_write",
]


def __getattr__(name: str) -> Any:
    """A name of this face, imported from its module on first use and kept (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}{_elsewhere(name)}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _elsewhere(name: str) -> str:
    """Where a name this face lacks lives instead, said in the error (another face's name)."""
    if name.startswith("_"):  # probes (``__path__``, pytest's ``_mock_name``, ...): no face holds
        return ""  # a private name, and looking would import the other faces
    for face in ("contextplane.section", "contextplane"):
        if name in getattr(_importlib.import_module(face), "__all__", ()):
            return f"; it is in {face}: from {face} import {name}"
    return ""
