"""One consistent read per turn on PostgreSQL (ADR D2): the core's deterministic case, a
supersession committed by a section between always-on (20) and retrieved (50), run on the
PostgreSQL store. Its REPEATABLE READ view opened before the write, so the projection shows
the old state wholly; the next one shows the new state wholly. Both compositions: the async
one opens the view in a worker thread and drafts the writer concurrently with the memory
sections, reading through ``contextplane.store.aio``'s worker-thread fallback."""

from __future__ import annotations

from typing import Any

import pytest

from contextplane_sections import always_on, retrieved
from tests.core.helpers import host_of
from tests.core.test_consistent_read import COMPOSE, SupersedesMidTurn, delivered, seed


@pytest.mark.parametrize("path", sorted(COMPOSE))
def test_a_supersession_during_composition_is_all_or_nothing(pg_backend_factory: Any, path: str) -> None:
    compose = COMPOSE[path]
    store = pg_backend_factory().memories
    old = seed(store)
    writer = SupersedesMidTurn(store, old)
    host = host_of(always_on, writer, retrieved)
    p = compose("deploy window", store, budget_tokens=0, host=host, record=False)
    (new,) = writer.new_ids
    assert old in p.section("always_on").item_ids and new not in delivered(p)
    writer.new_ids.append("done")
    q = compose("deploy window", store, budget_tokens=0, host=host, record=False)
    assert new in q.section("retrieved").item_ids and old not in delivered(q)
