"""Working state (ADR D6 priority 1): the turn's goal, plan, tasks, watches and schedules.

Trusted and operational, so it is never shed; instead each part has a cap, documented here and
in docs/hooks.md, so a runaway plan cannot eat the budget:

============  =========================================
part          cap
============  =========================================
goal          one line, 300 chars, plus its status
plan          12 steps (then "+N more steps")
tasks         20 open tasks (then "+N more tasks")
watches       10 (then "+N more watches")
schedules     10 (then "+N more schedules")
any item      200 chars (longer items end in "…")
============  =========================================

The state is a mapping; items may be strings or mappings with ``title``/``text`` and
``status``/``done``/``when`` keys. Unknown keys are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contextplane.section import ContextSection, Draft, ProjectionRequest, Row, Shed, hookimpl
from contextplane_sections.envelopes import WORKING_STATE

NAME = "working_state"
PRIORITY = 10
GOAL_CAP = 300
ITEM_CAP = 200
CAPS = {"plan": 12, "tasks": 20, "watches": 10, "schedules": 10}
LABELS = {"plan": "Plan", "tasks": "Open tasks", "watches": "Watches", "schedules": "Schedules"}
NOUNS = {"plan": "steps", "tasks": "tasks", "watches": "watches", "schedules": "schedules"}


def clip(text: str, cap: int) -> str:
    """Cut at a word boundary within ``cap`` chars, marking the cut."""
    text = " ".join(str(text).split())
    if len(text) <= cap:
        return text
    cut = text[: cap - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > cap // 2 else cut) + "…"


def _item(value: Any) -> str:
    if isinstance(value, Mapping):
        title = value.get("title") or value.get("text") or value.get("step") or value.get("name") or ""
        extra = []
        if "done" in value:
            extra.append("done" if value["done"] else "todo")
        if value.get("status"):
            extra.append(str(value["status"]))
        if value.get("when"):
            extra.append(f"when {value['when']}")
        suffix = f" ({', '.join(extra)})" if extra else ""
        return clip(str(title), ITEM_CAP) + suffix
    return clip(str(value), ITEM_CAP)


def _items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | Mapping) or not isinstance(value, Sequence):
        return [value]
    return list(value)


def draft(request: ProjectionRequest) -> Draft:
    state = request.state
    rows: list[Row] = []
    goal = state.get("goal")
    if goal:
        text = goal.get("title") or goal.get("text") if isinstance(goal, Mapping) else goal
        status = state.get("status") or (goal.get("status") if isinstance(goal, Mapping) else None)
        line = f"Goal: {clip(str(text), GOAL_CAP)}"
        if status:
            line += f" (status: {clip(str(status), 60)})"
        rows.append(Row("goal", 1, line))
    for rank, part in enumerate(("plan", "tasks", "watches", "schedules"), start=2):
        items = _items(state.get(part))
        if not items:
            continue
        cap = CAPS[part]
        shown = items[:cap]
        numbered = part == "plan"
        lines = [f"{i}. {_item(v)}" if numbered else f"* {_item(v)}" for i, v in enumerate(shown, start=1)]
        if len(items) > cap:
            lines.append(f"+{len(items) - cap} more {NOUNS[part]}")
        rows.append(Row(part, rank, f"{LABELS[part]}:\n" + "\n".join(lines)))
    return Draft(rows)


SECTION = ContextSection(
    NAME,
    priority=PRIORITY,
    shed=Shed.NEVER,
    draft=draft,
    envelope=WORKING_STATE,
    cheap=True,  # formats the request's own state: no I/O, so it drafts on the event loop
    description="The turn's goal, plan, open tasks, watches and schedules (capped per part).",
)


@hookimpl
def register_context_sections(register: Callable[[ContextSection], None]) -> None:
    register(SECTION)
