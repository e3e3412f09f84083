"""The trajectory's projection entry keeps the turn's budget table and shed steps (what an
inspector shows for a recorded turn), and an incognito turn's entry keeps no error text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextplane import (
    ContextSection,
    Envelope,
    Row,
    Shed,
    compose_projected_context,
    deliver,
    hookimpl,
    plugin_host_with,
)
from contextplane.delivery import plain_projection_message
from contextplane.observability import TrajectoryWriter
from contextplane.observability.snapshots import budget_rows, shed_steps
from contextplane.testing.memory import InMemoryBackend


class Sections:
    plugin_name = "budget_sections"

    @hookimpl
    def register_context_sections(self, register: Any) -> None:
        def notes(_req: Any) -> list[Row]:
            return [Row(f"n{i}", i, f"note {i} " + "x" * 60) for i in range(1, 6)]

        def broken(_req: Any) -> list[Row]:
            raise RuntimeError("secret-ish provider detail")

        register(ContextSection("notes", 50, Shed.DROP_ROWS, notes, Envelope("notes")))
        register(ContextSection("broken", 60, Shed.DROP_ROWS, broken, Envelope("broken")))


def turn(tmp_path: Path, *, incognito: bool) -> tuple[Any, Any]:
    backend = InMemoryBackend(trajectory=TrajectoryWriter(tmp_path / "traj"))
    host = plugin_host_with([Sections()])
    projection = compose_projected_context(
        "q", backend.memories, None, {}, session_id="s", turn_index=1, budget_tokens=50,
        incognito=incognito, backend=backend, host=host,
    )
    deliver(projection, [], prefix="p", call_index=0, wrap=plain_projection_message, host=host)
    [entry] = [e for e in backend.trajectory.read("s").entries if e.kind == "projection"]
    return projection, entry


def test_the_entry_holds_the_budget_table_and_the_shed_steps_in_order(tmp_path: Path) -> None:
    projection, entry = turn(tmp_path, incognito=False)
    assert projection.overflow, "the budget must force shedding, or the test proves nothing"
    assert entry.data["overflow"] == shed_steps(projection)
    first = entry.data["overflow"][0]
    assert (first["section"], first["action"]) == ("notes", "drop_row") and first["items"] >= 1
    rows = {r["name"]: r for r in entry.data["budget"]}
    assert entry.data["budget"] == budget_rows(projection)
    assert rows["notes"]["offered"] == 5 and rows["notes"]["kept"] < 5 and rows["notes"]["truncated"] is True
    assert "secret-ish provider detail" in rows["broken"]["error"]


def test_an_incognito_entry_keeps_sizes_but_no_error_text(tmp_path: Path) -> None:
    _projection, entry = turn(tmp_path, incognito=True)
    rows = {r["name"]: r for r in entry.data["budget"]}
    assert rows["broken"]["error"] == "error"
    assert "secret-ish" not in str(entry.data)
