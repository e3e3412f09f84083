"""``observability.records_durability`` on PostgreSQL (issue 26): the turn's records used to
commit with ``synchronous_commit = off`` hard-coded, so an immediate stop right after a turn
returned lost its injection row or inputs in 2 runs of 3. Now "full" (the default) commits them
like every write and "relaxed" opts into the old behaviour; what each record transaction runs
with is read inside it (``SHOW synchronous_commit``) while a real turn is recorded."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from contextplane import (
    ContextSection,
    Envelope,
    Row,
    Shed,
    compose_projected_context,
    hookimpl,
    plugin_host_with,
)
from contextplane.config import structure


class OneRow:
    plugin_name = "one_row"

    @hookimpl
    def register_context_sections(self, register: Any) -> None:
        register(
            ContextSection("one", 50, Shed.DROP_SECTION, lambda _r: [Row("r1", 1, "kiwi")], Envelope("one"))
        )


@pytest.mark.parametrize(("durability", "expected"), [(None, "on"), ("full", "on"), ("fsync", "on"), ("relaxed", "off")])
def test_each_record_transaction_commits_as_configured(
    pg_backend_factory: Callable[..., Any], durability: str | None, expected: str
) -> None:
    settings = {} if durability is None else {"observability": {"records_durability": durability}}
    config = structure(settings)
    backend = pg_backend_factory(config=config)
    seen: list[str] = []
    original = backend.db.record_transaction

    @contextlib.contextmanager
    def spying() -> Iterator[Any]:
        with original() as conn:
            seen.append(conn.execute("SHOW synchronous_commit").fetchone()[0])
            yield conn

    backend.db.record_transaction = spying
    projection = compose_projected_context(
        "kiwi",
        backend,
        session_id="s",
        turn_index=1,
        budget_tokens=500,
        host=plugin_host_with([OneRow()], config),
    )
    assert projection.record_status == "recorded"
    assert [r.turn_index for r in backend.injections.rows("s")] == [1]
    assert backend.snapshots.get_inputs("s", 1) is not None
    assert len(seen) >= 2, "the turn's injection row and inputs did not go through record_transaction"
    assert set(seen) == {expected}
