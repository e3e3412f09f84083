"""One requirement as a table writes it (id, kind, sentence, capability), before the kit makes it
a ``Requirement``.

Why its own module: the tables (``section_requirements``, ``store_requirements``) are long and
``requirements`` looks ids up across all of them, so it imports them; were the tables to build
``Requirement`` objects themselves, each would import ``requirements`` back. An ``Entry`` is plain
data, so the tables import only this and nothing imports back.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Kind = Literal["prompt", "context", "store", "records", "runtime"]


class Entry(NamedTuple):
    """A requirement's fields, in ``Requirement``'s order."""

    id: str
    kind: Kind
    sentence: str
    capability: str | None = None
