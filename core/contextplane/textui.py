"""Plain text for the command line: aligned tables, and the per-section budget table.

Presenters live here, not in a command module, so anything that prints a projection (the
``preview`` command, the demo) imports them without importing the command line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextplane.types import ProjectedContext


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, a dashed rule under the headers, no trailing spaces."""
    cells = [[str(h) for h in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def budget_table(projection: ProjectedContext) -> str:
    """Per-section budget table: what each section offered, delivered and why."""
    rows = []
    for s in projection.sections:
        if s.suppressed:
            status = f"suppressed ({s.suppressed})"
        elif s.error:
            status = f"error: {s.error[:60]}"
        elif s.truncated:
            status = "shed"
        else:
            status = "ok"
        rows.append([s.name, s.plugin, s.priority, s.offered, len(s.item_ids), s.chars, s.chars // 4, status])
    budget = "unbounded" if projection.budget_chars is None else str(projection.budget_chars)
    rows.append(
        ["total", "", "", "", "", projection.used_chars, projection.approx_tokens, f"budget {budget}"]
    )
    return table(["section", "plugin", "prio", "offered", "kept", "chars", "~tokens", "status"], rows)


def one_line(text: str) -> str:
    """``text`` as one line: its non-blank lines joined by spaces (for notices on stderr)."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())
