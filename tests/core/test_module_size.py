"""No module in core over 500 lines, except the ones listed below, each with its reason (issue 25).

Why a guard: a module past a few hundred lines has almost always taken on a second job, and the
split is cheapest before the next feature lands in it. The line is the issue's (500); a module
that must stay longer is argued here, one line each, where the next reviewer reads it. An entry
that no longer needs its exception fails too, so the list only ever shrinks to what is true.
Reads files only; imports nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core" / "contextplane"
MOST_LINES = 500

#: Modules allowed over ``MOST_LINES`` (paths relative to ``core/contextplane``): why, one line.
ALLOWED: Mapping[str, str] = {
    "testing/records.py": (
        "the records kit, one job (the record parts' checks), 23 lines over: a split would move its"
        " check classes' __module__, which third parties' kit subclasses and failure output show"
    ),
}


def line_counts(core: Path = CORE) -> dict[str, int]:
    """Lines of every module under ``core``, by path relative to it."""
    return {
        p.relative_to(core).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(core.rglob("*.py"))
    }


def oversized(counts: Mapping[str, int], allowed: Mapping[str, str]) -> list[str]:
    return [f"{path} ({n} lines)" for path, n in counts.items() if n > MOST_LINES and path not in allowed]


def stale(counts: Mapping[str, int], allowed: Mapping[str, str]) -> list[str]:
    """Allowed modules that are gone or no longer over the line: drop them from ``ALLOWED``."""
    return [path for path in allowed if counts.get(path, 0) <= MOST_LINES]


def test_no_core_module_is_over_500_lines_unless_allowed_with_a_reason() -> None:
    counts = line_counts()
    assert "runtime.py" in counts and len(counts) > 100, "module discovery broke"
    found = oversized(counts, ALLOWED)
    assert not found, (
        f"core modules over {MOST_LINES} lines: split each by job (see docs/architecture.md, step 7: a "
        "package of modules, the old path a re-export), or argue it in ALLOWED with a one-line "
        "reason: " + ", ".join(found)
    )


def test_every_allowed_module_still_needs_its_exception() -> None:
    assert all(reason.strip() for reason in ALLOWED.values()), "every allowed module needs its reason"
    gone = stale(line_counts(), ALLOWED)
    assert not gone, f"these are {MOST_LINES} lines or fewer now (or gone): remove them from ALLOWED: {gone}"


def test_the_checks_catch_a_long_module_and_a_stale_exception(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "short.py").write_text("x = 1\n" * MOST_LINES, encoding="utf-8")
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MOST_LINES + 1), encoding="utf-8")
    counts = line_counts(tmp_path)
    assert counts == {"pkg/long.py": MOST_LINES + 1, "short.py": MOST_LINES}
    assert oversized(counts, {}) == [f"pkg/long.py ({MOST_LINES + 1} lines)"]
    assert oversized(counts, {"pkg/long.py": "argued"}) == []
    assert stale(counts, {"pkg/long.py": "argued", "short.py": "argued", "gone.py": "argued"}) == [
        "short.py",
        "gone.py",
    ]
