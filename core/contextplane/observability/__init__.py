"""Prompt observability (ADR D5): snapshots by reference, the trajectory, full-text capture."""

from contextplane.observability.redaction import Redactor, bound_bytes, capture_text
from contextplane.observability.snapshots import (
    PrefixRef,
    PromptRecorder,
    PromptSnapshot,
    SectionRef,
    SnapshotStore,
    StrippedFrame,
    TurnRecord,
    default_telemetry_path,
)
from contextplane.observability.trajectory import (
    TrajectoryEntry,
    TrajectoryRead,
    TrajectoryWriter,
    read_trajectory,
)

__all__ = [
    "PrefixRef",
    "PromptRecorder",
    "PromptSnapshot",
    "Redactor",
    "SectionRef",
    "SnapshotStore",
    "StrippedFrame",
    "TrajectoryEntry",
    "TrajectoryRead",
    "TrajectoryWriter",
    "TurnRecord",
    "bound_bytes",
    "capture_text",
    "default_telemetry_path",
    "read_trajectory",
]
