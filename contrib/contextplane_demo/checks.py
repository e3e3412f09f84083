"""The demo's checks: the ADR's promises, computed from what was composed and what was logged.

Nothing here is true by construction: each check reads the projections the session composed,
the injection-log rows the backend recorded and the sections' own declarations (which carry
memory, which a goal turn suppresses), so breaking the store's filter, a section's flag or
the recording shows up as a failed check.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextplane import ContextSection, ProjectedContext
from contextplane.records import InjectionRow
from contextplane_demo.fixtures import Seeded
from contextplane_demo.script import Turn

#: One check: its name, whether it held, and what was wrong when it did not.
Check = tuple[str, bool, str]


def run_checks(
    results: Sequence[tuple[Turn, ProjectedContext]],
    seeded: Seeded,
    logged: Sequence[InjectionRow],
    sections: Sequence[ContextSection],
) -> tuple[Check, ...]:
    """The checks, in the order the demo prints them. ``logged`` is the session's injection
    log rows written during the run, ``sections`` the context sections that were registered."""
    checks: list[Check] = []
    over = [t.label for t, p in results if not p.within_budget]
    checks.append(
        ("projected context within budget on every turn", not over, f"over on: {over}" if over else "")
    )

    leaked = sorted(
        f"{rid} ({why}) in turn {t.label}"
        for t, p in results
        for ids in p.delivered_ids.values()
        for rid in ids
        if (why := seeded.never_deliverable.get(rid))
    )
    texts = "\n".join(p.text for _, p in results)
    leaked += [
        f"text of a {why} row" for rid, why in seeded.never_deliverable.items() if f"[{rid} |" in texts
    ]
    if "MUST NOT APPEAR AS PRIOR" in texts:
        leaked.append("the active session's own summary")
    checks.append(("non-deliverable rows never delivered", not leaked, "; ".join(leaked)))

    delivered_new = any(seeded.replacement_id in ids for _, p in results for ids in p.delivered_ids.values())
    checks.append(("the replacement of the superseded fact is delivered", delivered_new, ""))

    memory = {s.name for s in sections if s.carries_memory}
    # Tags only memory sections are wrapped in: none may appear in an incognito projection.
    memory_tags = {s.envelope.tag for s in sections if s.carries_memory} - {
        s.envelope.tag for s in sections if not s.carries_memory
    }
    incognito_ok = bool(memory) and all(
        not any(s.item_ids for s in p.sections if s.name in memory)
        and all((r := p.section(name)) is None or r.suppressed == "incognito" for name in memory)
        and not any(f"<{tag}>" in p.text for tag in memory_tags)
        for t, p in results
        if t.incognito
    )
    logged_turns = [r.turn_index for r in logged]
    expected_turns = [i for i, (t, _) in enumerate(results, start=1) if not t.incognito]
    checks.append(
        (
            "incognito: no memory sections and no injection-log row",
            incognito_ok and logged_turns == expected_turns,
            f"logged turns {logged_turns}, expected {expected_turns}",
        )
    )

    digest = [s for s in sections if s.goal_suppressed]
    goal_ok = bool(digest) and all(
        (r := p.section(s.name)) is not None
        and r.suppressed == "goal_turn"
        and (s.inner_tag is None or f"<{s.inner_tag}>" not in p.text)
        for t, p in results
        if t.goal_turn
        for s in digest
    )
    checks.append(("goal turn: no prior-session digest", goal_ok, ""))

    recorded = [p for t, p in results if not t.incognito]
    logged_match = len(logged) == len(expected_turns) and all(
        r.delivered == {k: list(v) for k, v in p.delivered_ids.items()}
        for r, p in zip(logged, recorded, strict=False)
    )
    checks.append(("injection log ids equal the delivered ids", logged_match, ""))

    shed_turn = [p for t, p in results if t.context_window < 50_000]
    checks.append(("the small-model turn shed under pressure", all(p.overflow for p in shed_turn), ""))
    return tuple(checks)
