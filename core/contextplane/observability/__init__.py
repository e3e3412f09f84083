"""Prompt observability (ADR D5): the recording policy, the trajectory, full-text capture.

Where snapshots are stored is the backend's business (``contextplane.records``); the
``contextplane.records`` plugin (``observer``) is what records them, through the hooks.
"""

from contextplane.observability.redaction import Redactor, bound_bytes, capture_text
from contextplane.observability.snapshots import PromptRecorder, TurnRecord
from contextplane.observability.trajectory import (
    TrajectoryEntry,
    TrajectoryRead,
    TrajectoryWriter,
    read_trajectory,
)
from contextplane.records.snapshots import PrefixRef, PromptSnapshot, SectionRef, StrippedFrame

__all__ = [
    "PrefixRef",
    "PromptRecorder",
    "PromptSnapshot",
    "Redactor",
    "SectionRef",
    "StrippedFrame",
    "TrajectoryEntry",
    "TrajectoryRead",
    "TrajectoryWriter",
    "TurnRecord",
    "bound_bytes",
    "capture_text",
    "read_trajectory",
]
