"""Prompt observability (ADR D5): the recording policy, the trajectory, full-text capture.

Where snapshots are stored is the backend's business (``contextplane.records``); the
``contextplane.records`` plugin (``observer``) is what records them, through the hooks.

Lazy (PEP 562): importing a submodule runs this file first, and ``contextplane.recorder``
imports ``observability.redaction`` while ``observability.snapshots`` imports the recorder;
an eager import here made ``import contextplane.recorder`` (before anything else) a circular
import. A name is loaded from its module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextplane.observability.redaction import Redactor, bound_bytes, capture_text
    from contextplane.observability.snapshots import PromptRecorder, TurnRecord
    from contextplane.observability.trajectory import (
        TrajectoryEntry,
        TrajectoryRead,
        TrajectoryWriter,
        read_trajectory,
    )
    from contextplane.records.snapshots import PrefixRef, PromptSnapshot, SectionRef, StrippedFrame

_WHERE: dict[str, str] = {
    "Redactor": "contextplane.observability.redaction",
    "bound_bytes": "contextplane.observability.redaction",
    "capture_text": "contextplane.observability.redaction",
    "PromptRecorder": "contextplane.observability.snapshots",
    "TurnRecord": "contextplane.observability.snapshots",
    "TrajectoryEntry": "contextplane.observability.trajectory",
    "TrajectoryRead": "contextplane.observability.trajectory",
    "TrajectoryWriter": "contextplane.observability.trajectory",
    "read_trajectory": "contextplane.observability.trajectory",
    "PrefixRef": "contextplane.records.snapshots",
    "PromptSnapshot": "contextplane.records.snapshots",
    "SectionRef": "contextplane.records.snapshots",
    "StrippedFrame": "contextplane.records.snapshots",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


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
