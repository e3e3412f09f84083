"""What a consolidated write returns: each row's ``WriteOutcome``, from the decisions a store made
(``memory.consolidation``'s rules, applied in the store's own query language), written once.

Why: the embedded, PostgreSQL and in-memory stores each turned their decisions into outcomes
with the same loop, and an outcome worded differently on one store is a caller (the MCP
server, the console) that reports a write differently by backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contextplane.memory.consolidation import Outcome, WriteOutcome


def write_outcomes(
    count: int,
    new_ids: Mapping[int, int | str],
    duplicate_of: Mapping[int, int | str],
    outdated_of: Mapping[int, tuple[str, str]],
    superseded: Mapping[int, Sequence[str]],
    near: Mapping[int, tuple[tuple[str, float], ...]],
) -> tuple[list[WriteOutcome], dict[int, WriteOutcome]]:
    """The outcome of each of ``count`` rows, in order, and of each stored row by its index (in
    index order: a store records their ``created`` events from it).

    ``new_ids``: the id each stored row got; ``duplicate_of``: a row found to be a copy of a
    stored row (its id) or of an earlier row of the batch (its index); ``outdated_of``: a row
    whose text a newer head replaced (that head, the replaced row); ``superseded``: the heads a
    stored row replaced; ``near``: a stored row's near duplicates (single writes only)."""
    outcomes: list[WriteOutcome] = []
    stored: dict[int, WriteOutcome] = {}
    for index in range(count):
        if index in new_ids and index not in superseded and not near.get(index):
            result = stored[index] = WriteOutcome(str(new_ids[index]))  # stored: the common case
            outcomes.append(result)
            continue
        if index in duplicate_of:
            target = duplicate_of[index]
            found = str(new_ids[target]) if isinstance(target, int) else target
            outcomes.append(WriteOutcome(found, "duplicate", duplicate_of=found))
            continue
        if index in outdated_of:
            head, old = outdated_of[index]
            outcomes.append(WriteOutcome(head, "outdated", duplicate_of=old))
            continue
        olds = superseded.get(index, [])
        close = tuple(p for p in near.get(index, ()) if p[0] not in olds)
        outcome: Outcome = "superseded" if olds else "near_duplicate" if close else "stored"
        result = stored[index] = WriteOutcome(
            str(new_ids[index]), outcome, superseded=olds, near_duplicates=close
        )
        outcomes.append(result)
    return outcomes, stored
