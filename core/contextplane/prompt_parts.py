"""The parts of a prompt that snapshots keep by reference: a stable-prefix section and a
context frame stripped from the checkpoint.

Why a module of their own: both the value types (``StablePrefix``, ``ModelCall`` in
``contextplane.types``) and the records' storage protocols (``contextplane.records.snapshots``)
hold them. Here, importing nothing of contextplane, the records' protocols can use them without
importing ``contextplane.types``, and so the request can name the backend its records go to
without closing an import cycle (request -> backend -> snapshots -> types -> request).
``contextplane.types`` re-exports both.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class PrefixSection:
    """One stable-prefix section by reference: what snapshots store instead of the text."""

    name: str
    plugin: str
    chars: int
    sha256: str


@attrs.frozen
class StrippedFrame:
    """A context frame found in the checkpoint and kept out of the model's view (D2 migration)."""

    message_id: str | None
    chars: int
    sha256: str | None
