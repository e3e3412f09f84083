"""The in-memory reference backend's old import path: it is an implementation of the record
protocols, not a test helper, so it lives in ``contextplane.backends.memory``; the kit and third
parties that import it from here keep working."""

from __future__ import annotations

from contextplane.backends.memory import (
    InMemoryBackend,
    InMemoryInjectionLog,
    InMemoryKnowledgeStore,
    InMemorySessionSummaries,
    InMemorySnapshotStore,
)

__all__ = [
    "InMemoryBackend",
    "InMemoryInjectionLog",
    "InMemoryKnowledgeStore",
    "InMemorySessionSummaries",
    "InMemorySnapshotStore",
]
