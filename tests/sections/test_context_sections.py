"""The D6 projected sections: priorities, shedding, scope, trust, skills and working state."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from contextplane import compose_projected_context
from contextplane.backends.sqlite import SQLiteInjectionLog, SQLiteSessionSummaries
from contextplane.notices import BudgetWarning, PluginWarning
from contextplane.store import open_store
from contextplane.testing.memory import InMemoryBackend
from contextplane_sections import skills as skills_mod
from contextplane_sections import working_state

from .conftest import FakeStore, chunk, standard_host

LONG = "x" * 120


def many_chunks():
    out = [
        chunk(
            "a1",
            "standing rule one " + LONG,
            source_type="operator",
            delivery_policy="always",
            review_state="confirmed",
        ),
        chunk(
            "a2",
            "standing rule two " + LONG,
            source_type="operator",
            delivery_policy="always",
            review_state="confirmed",
        ),
    ]
    out += [
        chunk(f"r{i}", f"retrieved memory {i} " + LONG, source_type="operator", review_state="confirmed")
        for i in range(1, 7)
    ]
    return out


def compose(store, config, budget_tokens, *, skills=None, state=None, summaries=None, **kw):
    host = standard_host(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compose_projected_context(
            "memory",
            store,
            skills
            if skills is not None
            else [(f"skill{i:02d}", "does a thing " + "y" * 60) for i in range(12)],
            state if state is not None else {"goal": "Ship it"},
            session_id="s-now",
            budget_tokens=budget_tokens,
            host=host,
            record=False,
            backend=InMemoryBackend(store, summaries=summaries) if summaries else None,
            **kw,
        )


@pytest.fixture
def summaries(tmp_path):
    s = SQLiteSessionSummaries(tmp_path / "sum.sqlite3")
    for i in range(1, 5):
        s.add(
            f"s-{i}",
            f"summary of session {i} about memory " + "z" * 80,
            topic="memory",
            at=f"2026-11-0{i}T00:00:00+00:00",
        )
    return s


def test_priorities_and_shed_sequence_of_the_standard_sections(tmp_config, summaries) -> None:
    store = FakeStore(many_chunks(), search_order=[f"r{i}" for i in range(1, 7)])
    config = tmp_config()
    items = [(f"skill{i:02d}", "does a thing " + "y" * 60) for i in range(40)]
    full = compose(store, config, 0, summaries=summaries, skills=items)
    assert [s.name for s in full.sections] == [
        "working_state",
        "always_on",
        "skills",
        "prior_sessions",
        "retrieved",
    ]
    assert [s.priority for s in full.sections] == [10, 20, 30, 40, 50]
    sequences = []
    for chars in range(full.used_chars, 0, -40):
        p = compose(store, config, chars // 4, summaries=summaries, skills=items)
        sequences.append([(s.section, s.action) for s in p.overflow])
    assert max(sequences, key=len) == [
        ("retrieved", "drop_row"),
        ("prior_sessions", "drop_row"),
        ("skills", "degrade_row"),
        ("skills", "drop_to_floor"),
    ]


def test_retrieved_sheds_from_the_lowest_ranked_end(tmp_config) -> None:
    store = FakeStore(many_chunks(), search_order=[f"r{i}" for i in range(1, 7)])
    full = compose(store, tmp_config(), 0)
    row = len(full.text.split("- [r6")[1].split("\n")[0]) + len("- [r6") + 1
    p = compose(store, tmp_config(), -(-(full.used_chars - row) // 4))
    assert p.section("retrieved").item_ids == ("r1", "r2", "r3", "r4", "r5")


def test_digest_sheds_entry_by_entry_newest_kept_first(tmp_config, summaries) -> None:
    store = FakeStore(many_chunks())
    full = compose(store, tmp_config(), 0, summaries=summaries)
    digest = full.section("prior_sessions").item_ids
    assert [i.split(":")[1] for i in digest] == ["s-4", "s-3", "s-2", "s-1"]
    # Budget: everything but the digest, plus room for two entries.
    no_digest = full.used_chars - full.section("prior_sessions").chars
    for keep in (3, 2, 1):
        p = compose(store, tmp_config(), 0, summaries=summaries)
        entries = [line for line in p.text.splitlines() if line.startswith("- session ")]
        budget = (
            no_digest
            + len("Prior sessions:\n<prior_sessions>\n</prior_sessions>\n")
            + sum(len(e) + 1 for e in entries[:keep])
        )
        p = compose(store, tmp_config(), budget // 4 + 1, summaries=summaries)
        kept = p.section("prior_sessions").item_ids
        assert kept == digest[: len(kept)] and 1 <= len(kept) <= keep + 1
        assert p.section("retrieved").item_ids == ()


def test_skills_degrade_to_names_before_any_name_is_dropped(tmp_config) -> None:
    store = FakeStore([])
    items = [(f"skill{i:02d}", "description " + "d" * 80) for i in range(30)]
    full = compose(store, tmp_config(), 0, skills=items)
    names_only = full.used_chars - sum(len(" description " + "d" * 80) + 1 for _ in items)
    p = compose(store, tmp_config(), names_only // 4 + 1, skills=items)
    assert len(p.section("skills").item_ids) == 30
    assert "+" not in p.text.split("<available_skills>")[1]
    tight = compose(store, tmp_config(), 1, skills=items)
    assert len(tight.section("skills").item_ids) == skills_mod.DEFAULT_FLOOR
    assert "- skill09\n+20 more skills (ask for the full list)\n</available_skills>" in tight.text


def test_skills_floor_is_configurable_and_validated(tmp_config) -> None:
    store = FakeStore([])
    items = [(f"skill-number-{i}", "d" * 50) for i in range(8)]
    p = compose(store, tmp_config(plugin={"skills": {"floor": 3}}), 1, skills=items)
    assert p.section("skills").item_ids == ("skill-number-0", "skill-number-1", "skill-number-2")
    host = standard_host(tmp_config(plugin={"skills": {"floor": -1}}))
    assert [r.section.name for r in host.context_sections()].count("skills") == 0
    assert (
        "invalid value for plugin.skills.floor: expected a whole number >= 0, got -1"
        in host.failures[0].error
    )


def test_skills_dir_with_a_malformed_skill_md(tmp_path: Path, tmp_config) -> None:
    root = tmp_path / "skills"
    for name in ("deploy", "rollback"):
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Does {name}.\n---\nbody\n")
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("---\nname: [unclosed\n---\n")
    (root / "nameless").mkdir()
    (root / "nameless" / "SKILL.md").write_text("---\ndescription: no name\n---\n")
    config = tmp_config(skills={"dir": "skills"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = compose_projected_context(
            "q", FakeStore([]), None, {}, budget_tokens=0, host=standard_host(config), record=False
        )
    assert p.section("skills").item_ids == ("deploy", "rollback")
    msgs = sorted(str(w.message) for w in caught if issubclass(w.category, PluginWarning))
    assert len(msgs) == 2
    assert msgs[0].startswith(f"skipping skill {root / 'broken' / 'SKILL.md'}: it cannot be read: ")
    assert msgs[1] == f"skipping skill {root / 'nameless' / 'SKILL.md'}: it front matter has no 'name'"


def test_only_never_shed_sections_over_budget_warn_exactly_once(tmp_config) -> None:
    store = FakeStore(many_chunks(), search_order=["r1"])
    host = standard_host(tmp_config())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for turn in range(4):
            p = compose_projected_context(
                "memory",
                store,
                [],
                {"goal": "Ship it"},
                budget_tokens=20,
                host=host,
                turn_index=turn,
                record=False,
            )
    assert [s.name for s in p.sections if s.item_ids] == ["working_state", "always_on"]
    assert p.used_chars > p.budget_chars
    budget = [w for w in caught if issubclass(w.category, BudgetWarning)]
    assert len(budget) == 1
    assert "working_state (" in str(budget[0].message) and "always_on (" in str(budget[0].message)


def test_inject_min_trust_drops_lower_tiers(tmp_config) -> None:
    chunks = [
        chunk("op", "operator fact", source_type="operator", review_state="confirmed"),
        chunk("ag", "agent note", source_type="extracted"),
        chunk("ex", "external doc", source_type="ingest"),
        chunk("hot-ex", "external always", source_type="ingest", delivery_policy="always"),
    ]
    store = FakeStore(chunks, search_order=["ex", "ag", "op"])
    p = compose(store, tmp_config(context={"inject_min_trust": 2}), 0)
    assert p.section("retrieved").item_ids == ("ag", "op")
    assert p.section("always_on").item_ids == ()
    assert p.section("retrieved").meta["below_min_trust"] == 1


def test_on_demand_rows_are_never_injected(tmp_config) -> None:
    store = FakeStore(
        [chunk("od", "only via the tool", source_type="operator", delivery_policy="on_demand")],
        search_order=["od"],
    )
    p = compose(store, tmp_config(), 0)
    assert "od" not in str(p.delivered_ids) and "only via the tool" not in p.text


def test_working_state_caps_are_applied_and_documented() -> None:
    from contextplane import Config
    from contextplane.request import ProjectionRequest

    state = {
        "goal": "g" * 500,
        "plan": [f"step {i}" for i in range(20)],
        "tasks": [f"t{i}" for i in range(25)],
        "watches": ["w"] * 11,
        "schedules": [{"title": "s", "when": "now"}] * 12,
        "unknown": "ignored",
    }
    draft = working_state.draft(ProjectionRequest(query="", config=Config(), state=state))
    rows = {r.id: r.text for r in draft.rows}
    assert len(rows["goal"]) <= len("Goal: ") + working_state.GOAL_CAP and rows["goal"].endswith("…")
    assert rows["plan"].count("\n") == working_state.CAPS["plan"] + 1 and rows["plan"].endswith(
        "+8 more steps"
    )
    assert rows["tasks"].endswith("+5 more tasks") and rows["watches"].endswith("+1 more watches")
    assert rows["schedules"].endswith("+2 more schedules")
    doc = working_state.__doc__ or ""
    for part, cap in working_state.CAPS.items():
        assert f"{part}" in doc and f"{cap}" in doc
    assert "ignored" not in str(rows)


def test_scope_isolation_with_the_real_store(tmp_path: Path, tmp_config) -> None:
    store = open_store(tmp_path / "m.sqlite3")
    a = store.add_chunk("alpha deploy secret", source_type="operator", namespace="project:a")
    a_hot = store.add_chunk(
        "alpha standing deploy rule", source_type="operator", namespace="project:a", domain="hot"
    )
    x = store.add_chunk("session x deploy scratch", source_type="operator", namespace="session:x")
    g = store.add_chunk("global deploy fact", source_type="operator")
    config = tmp_config(context={"project": "b"})
    host = standard_host(config)
    for session in ("y", "z"):
        p = compose_projected_context(
            "deploy", store, [], {}, session_id=session, budget_tokens=0, host=host, record=False
        )
        ids = {i for ids in p.delivered_ids.values() for i in ids}
        assert g in ids
        assert not ids & {a, a_hot, x}
        assert "alpha" not in p.text and "session x" not in p.text
    p = compose_projected_context(
        "deploy", store, [], {}, session_id="x", project="a", budget_tokens=0, host=host, record=False
    )
    assert {a, a_hot, x, g} <= {i for ids in p.delivered_ids.values() for i in ids}


def test_injection_log_ids_equal_the_ids_in_the_composed_text(tmp_path: Path, tmp_config, summaries) -> None:
    store = FakeStore(many_chunks(), search_order=[f"r{i}" for i in range(1, 7)])
    log = SQLiteInjectionLog(tmp_path / "log.sqlite3")
    backend = InMemoryBackend(store, summaries=summaries, injections=log)
    host = standard_host(tmp_config())
    for turn, budget in enumerate((0, 300, 120)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = compose_projected_context(
                "memory",
                store,
                [("deploy", "Deploys.")],
                {"goal": "g"},
                session_id="s-now",
                turn_index=turn,
                budget_tokens=budget,
                host=host,
                backend=backend,
            )
        row = log.rows("s-now")[-1]
        assert row.turn_index == turn and row.approx_tokens == p.used_chars // 4
        memory_ids = [i for s in ("always_on", "retrieved") for i in row.delivered.get(s, [])]
        in_text = [
            line.split("[", 1)[1].split(" |")[0] for line in p.text.splitlines() if line.startswith("- [")
        ]
        assert memory_ids == in_text
        digest_in_text = [line.split()[2] for line in p.text.splitlines() if line.startswith("- session ")]
        assert [i.split(":")[1] for i in row.delivered.get("prior_sessions", [])] == digest_in_text
    compose_projected_context(
        "memory",
        store,
        [],
        {},
        session_id="s-now",
        incognito=True,
        budget_tokens=0,
        host=host,
        backend=backend,
    )
    assert [r.turn_index for r in log.rows("s-now")] == [0, 1, 2]
