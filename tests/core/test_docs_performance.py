"""The README's performance section stays a table a user can read (one line per benchmark: what,
the command, the latest figure, the target, met or not), and the history of runs lives in
docs/performance.md, which names every benchmark the README names.

Runs no benchmark: it reads the two files."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
HISTORY = ROOT / "docs" / "performance.md"

HEADER = ["benchmark", "command", "latest figure", "target", "met"]
#: The "met" words, as docs/performance.md ("The README's "met" column") defines them.
MET = {"yes", "**missed**", "partly", "**weak**", "—"}
#: A cell longer than this is a diary again: the history goes to docs/performance.md.
MAX_CELL = 300
BENCH_SCRIPT = re.compile(r"\bbench/[\w.-]+\.(?:py|sh)\b")


def performance_section(text: str) -> str:
    start = text.index("\n## Performance\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def tables(section: str) -> list[list[str]]:
    """Each run of consecutive lines that start with ``|``, as its lines."""
    found: list[list[str]] = []
    current: list[str] = []
    for line in section.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    if current:
        found.append(current)
    return found


def cells(line: str) -> list[str]:
    """A row's cells; a ``\\|`` inside a cell is part of it, as in GitHub's tables."""
    inner = line.strip()
    assert inner.startswith("|") and inner.endswith("|"), f"not a table row: {line[:80]}"
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner[1:-1])]


def the_table() -> list[list[str]]:
    found = tables(performance_section(README.read_text(encoding="utf-8")))
    assert len(found) == 1, f"README's Performance section has {len(found)} tables, expected one"
    return [cells(line) for line in found[0]]


def problems(rows: list[list[str]]) -> list[str]:
    """What is wrong with a performance table (its lines split into cells), one line each."""
    found: list[str] = []
    if rows[0] != HEADER:
        found.append(f"header {rows[0]} is not {HEADER}")
    if len(rows) < 2 or not all(set(c) <= set("-: ") for c in rows[1]):
        found.append("the second line is not the header's rule")
    body = rows[2:]
    if not body:
        found.append("the table has no benchmark")
    for row in body:
        name = row[0][:60]
        if len(row) != len(HEADER):
            found.append(f"{len(row)} cells in the row {name!r}")
            continue
        found.extend(
            f"a {len(cell)}-char cell in the row {name!r}: keep the latest figure in the README "
            "and move the runs to docs/performance.md"
            for cell in row
            if len(cell) > MAX_CELL
        )
        if row[4] not in MET:
            found.append(f"met cell {row[4]!r} of {name!r} is not one of {sorted(MET)}")
    names = [row[0] for row in body]
    if len(names) != len(set(names)):
        found.append("two rows name the same benchmark")
    return found


def test_the_performance_section_is_one_table_of_short_rows() -> None:
    assert problems(the_table()) == []


def test_every_row_runs_a_bench_script_that_exists() -> None:
    for row in the_table()[2:]:
        scripts = BENCH_SCRIPT.findall(row[1])
        assert scripts, f"the row {row[0][:60]!r} names no bench/ script in its command"
    named = set(BENCH_SCRIPT.findall(README.read_text(encoding="utf-8")))
    missing = sorted(s for s in named if not (ROOT / s).is_file())
    assert not missing, f"README names bench scripts that do not exist: {missing}"


def test_the_history_names_every_bench_script_the_readme_names() -> None:
    assert HISTORY.is_file(), "docs/performance.md (the runs behind the README's table) is missing"
    history = HISTORY.read_text(encoding="utf-8")
    named = set(BENCH_SCRIPT.findall(README.read_text(encoding="utf-8")))
    assert named, "README names no bench script"
    absent = sorted(s for s in named if s not in history)
    assert not absent, f"docs/performance.md has no runs of {absent}"


def test_the_history_defines_the_met_words_the_test_accepts() -> None:
    history = HISTORY.read_text(encoding="utf-8")
    legend = history[history.index('### The README\'s "met" column') :]
    legend = legend[: legend.index("\n### ", 1)]
    defined = set(re.findall(r"`([^`]+)`", legend)) & MET
    assert defined == MET, f"docs/performance.md defines {sorted(defined)}, the test {sorted(MET)}"


def test_the_checks_catch_a_diary_in_a_cell() -> None:
    """The shape the section had before this page existed: a figure cell holding every past
    run, a met cell with a sentence in it, a row missing a cell."""
    diary = "on schema 4 (session 5), three runs: p50 8.32, 7.29, 6.79 ms; " * 8
    lines = [
        "| benchmark | command | figure | target | met |",
        "|---|---|---|---|---|",
        f"| compose | `python bench/scale_bench.py` | {diary} | p50 ≤ 8 | yes |",
        "| async | `python bench/async_bench.py` | 1.19× | ≤ 1.2× | yes (machine not saturated) |",
        "| store | `python bench/store_bench.py` | 0.92 ms | ≤ 1.3× |",
    ]
    found = problems([cells(line) for line in lines])
    assert len(found) == 4, found
    assert "header" in found[0]
    assert "-char cell in the row 'compose'" in found[1]
    assert "met cell 'yes (machine not saturated)'" in found[2]
    assert "4 cells in the row 'store'" in found[3]
