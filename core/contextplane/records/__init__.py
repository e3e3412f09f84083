"""What a deployment remembers and records, as protocols core owns (ADR D5, D6, D8, D9).

Four records: memories (``KnowledgeStore``, in ``contextplane.store.protocol``), session
summaries (the digest's source), the injection log, and prompt snapshots. A *backend* bundles
one of each; sections and observers ask the turn's backend, never a file path, so a store
that is not SQLite gets the same injection log, digest and snapshots through its backend.
"""

from contextplane.records.backend import Backend, backend_of, check_backend, register_backend
from contextplane.records.injections import AsyncInjectionLog, InjectionLog, InjectionRow
from contextplane.records.snapshots import (
    AsyncSnapshotStore,
    PrefixRef,
    PromptSnapshot,
    SectionRef,
    SnapshotRow,
    SnapshotStore,
    StrippedFrame,
    decode_snapshot,
)
from contextplane.records.summaries import (
    AsyncSessionSummaries,
    SessionSummaries,
    SessionSummary,
    validate_summary,
)
from contextplane.records.turn_inputs import AsyncTurnInputStore, TurnInputs, TurnInputStore

__all__ = [
    "AsyncInjectionLog",
    "AsyncSessionSummaries",
    "AsyncSnapshotStore",
    "AsyncTurnInputStore",
    "Backend",
    "InjectionLog",
    "InjectionRow",
    "PrefixRef",
    "PromptSnapshot",
    "SectionRef",
    "SessionSummaries",
    "SessionSummary",
    "SnapshotRow",
    "SnapshotStore",
    "StrippedFrame",
    "TurnInputStore",
    "TurnInputs",
    "backend_of",
    "check_backend",
    "decode_snapshot",
    "register_backend",
    "validate_summary",
]
