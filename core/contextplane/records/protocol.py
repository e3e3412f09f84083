"""The backend's protocol: the one object that holds all four records of a deployment.

Why apart from ``contextplane.records.backend`` (which finds a store's backend and checks one):
this module imports only the records' and the store's protocols, no behaviour, so the value
types can name it (``ProjectionRequest.backend``) without importing the lookup machinery.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from contextplane.records.injections import InjectionLog
from contextplane.records.snapshots import SnapshotStore
from contextplane.records.summaries import SessionSummaries
from contextplane.store.protocol import KnowledgeStore


@runtime_checkable
class Backend(Protocol):
    """Memories, session summaries, the injection log and prompt snapshots, in one place.

    ``trajectory`` is the append-only session log snapshots reference (ADR 0102), or None when
    the backend keeps none. ``name`` says where the records live, for messages and logs.
    """

    @property
    def name(self) -> str: ...

    @property
    def memories(self) -> KnowledgeStore: ...

    @property
    def summaries(self) -> SessionSummaries: ...

    @property
    def injections(self) -> InjectionLog: ...

    @property
    def snapshots(self) -> SnapshotStore: ...

    @property
    def trajectory(self) -> Any: ...

    def close(self) -> None: ...
