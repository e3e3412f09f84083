"""The retrieved section's compact attribution and chronological layout (issue 21, item 4).

What the budget keeps is decided by rank (D6); only the kept rows are laid out by when they
happened. The kind, trust and scope most rows share are said once, in the heading."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from contextplane import ContextSection, Draft, Row, Shed, hookimpl, plugin_host_with
from contextplane.explain import replay
from contextplane.memory.model import MemoryChunk
from contextplane.sections import Envelope
from contextplane_sections import always_on, prior_sessions, retrieved, working_state
from contextplane_sections.attribution import common_attribution, compact_heading, compact_row, memory_row
from tests.explain.helpers import backend_at, config, host_with, turn

STORED = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _chunk(i: str, **kw: Any) -> MemoryChunk:
    kw.setdefault("memory_kind", "note")
    return MemoryChunk(id=i, content=f"memory {i}", created_at=STORED, updated_at=STORED, **kw)


def _section_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- [")]


# --------------------------------------------------------------------------- the label


def test_a_row_names_only_what_differs_from_the_rows_it_is_delivered_with() -> None:
    chunks = [
        _chunk("1", namespace="project:a", occurred_at=datetime(2023, 5, 8, tzinfo=UTC)),
        _chunk("2", namespace="project:a"),
        _chunk("3", namespace="", memory_kind="fact", source_type="operator"),
    ]
    common = common_attribution(chunks)
    assert (common.kind, common.trust, common.scope) == ("note", "external", "project:a")
    assert compact_row(chunks[0], 1, common).text == "[1 | 2023-05-08] memory 1"
    assert compact_row(chunks[1], 2, common).text == "[2 | stored 2026-12-01] memory 2"
    # the differing fields in the full label's order: kind, trust, date, scope
    assert compact_row(chunks[2], 3, common).text == "[3 | fact | operator | stored 2026-12-01 | global] memory 3"
    heading = compact_heading(common, "chronological")
    assert heading.startswith("Retrieved memories, oldest first.")
    assert "its kind is note, trust external, scope project:a:" in heading
    assert compact_heading(common, "rank").startswith("Retrieved memories, best match first.")


def test_ties_in_what_rows_share_are_decided_the_same_way_every_turn() -> None:
    a, b = _chunk("1", namespace="project:b"), _chunk("2", namespace="project:a")
    assert common_attribution([a, b]) == common_attribution([b, a])
    assert common_attribution([a, b]).scope == "project:a"


def test_the_compact_label_costs_a_fraction_of_the_full_one() -> None:
    chunks = [_chunk(str(i), namespace="project:conv-26", occurred_at=datetime(2023, 5, 8, tzinfo=UTC)) for i in range(40)]
    common = common_attribution(chunks)
    full = sum(len(memory_row(c, 1).text) for c in chunks)
    compact = sum(len(compact_row(c, 1, common).text) for c in chunks) + len(compact_heading(common, "chronological"))
    assert compact < 0.6 * full


# --------------------------------------------------------------------------- composed turns


def _store_with_dated_rows(backend: Any) -> dict[str, str]:
    """Four rows about deploys, said on four days; the newest matches the question best."""
    add = backend.memories.add_chunk
    return {
        "march": add("deploy note: the deploy freeze started", source_type="operator",
                     occurred_at=datetime(2023, 3, 1, tzinfo=UTC)),
        "may": add("deploy note: deploy window is Tuesday", source_type="operator",
                   occurred_at=datetime(2023, 5, 1, tzinfo=UTC)),
        "jan": add("deploy note", source_type="operator", occurred_at=datetime(2023, 1, 1, tzinfo=UTC)),
        "july": add("deploy window deploy window: the deploy window moved to Wednesday", source_type="operator",
                    occurred_at=datetime(2023, 7, 1, tzinfo=UTC)),
    }


def test_kept_rows_are_rendered_oldest_first_and_shed_by_rank(tmp_path: Path) -> None:
    cfg = config()
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        ids = _store_with_dated_rows(backend)
        whole = turn(host_with(cfg), backend, "when is the deploy window?")
        section = whole.section("retrieved")
        assert section is not None and set(section.item_ids) == set(ids.values())
        by_rank = list(section.item_ids)  # the report keeps rank order
        assert by_rank[0] == ids["july"]
        rows = _section_rows(whole.text)
        assert [r.split(" |")[0][3:] for r in rows] == [ids[k] for k in ("jan", "march", "may", "july")]
        # a budget that holds only some: the lowest-ranked go, the kept are still oldest first
        tight = turn(host_with(cfg), backend, "when is the deploy window?", index=2,
                     budget_tokens=(len(whole.text) - 2 * 40) // 4)
        kept = tight.section("retrieved")
        assert kept is not None and 0 < len(kept.item_ids) < 4
        assert list(kept.item_ids) == by_rank[: len(kept.item_ids)]
        shown = [r.split(" |")[0][3:] for r in _section_rows(tight.text)]
        dates = {ids[k]: k for k in ids}
        order = ["jan", "march", "may", "july"]
        assert sorted(shown, key=lambda i: order.index(dates[i])) == shown
        assert set(shown) == set(kept.item_ids)


def test_rank_order_is_one_setting_away(tmp_path: Path) -> None:
    cfg = config(retrieved_order="rank")
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        _store_with_dated_rows(backend)
        projected = turn(host_with(cfg), backend, "when is the deploy window?")
        section = projected.section("retrieved")
        assert section is not None
        assert [r.split(" |")[0][3:] for r in _section_rows(projected.text)] == list(section.item_ids)
        assert "Retrieved memories, best match first." in projected.text


def test_a_turn_recorded_before_the_compact_label_replays_naming_the_version(tmp_path: Path) -> None:
    """The release before this one labelled every row in full, in rank order, under the heading
    "Retrieved memories:" (reproduced here by relabelling this release's rows). Its recorded
    turns replay as changed, and the reason is the sections plugin's version, not "plugin not
    deterministic"."""

    def old_draft(request: Any) -> Draft:
        new = retrieved.draft(request)
        store = request.knowledge_store
        return Draft([memory_row(store.get(r.id), r.rank) for r in new.rows], new.meta)

    class OldRetrieved:
        @hookimpl
        def register_context_sections(self, register: Any) -> None:
            register(attrs.evolve(retrieved.SECTION, draft=old_draft, adraft=None))

    cfg = config()
    then = plugin_host_with([working_state, always_on, prior_sessions], cfg)
    then.register(OldRetrieved(), "retrieved", version="0.1.0")
    now = plugin_host_with([working_state, always_on, prior_sessions], cfg)
    now.register(retrieved, "retrieved", version="0.2.0")
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        _store_with_dated_rows(backend)
        old = turn(then, backend, "when is the deploy window?")
        assert "Retrieved memories:\n- [" in old.text and "| operator | occurred 2023-07-01 |" in old.text
        report = replay(backend, "s1", 1, host=now)
        assert not report.identical
        (diff,) = report.changed
        assert diff.label == "retrieved"
        assert diff.reasons == ("plugin 'retrieved' changed version: 0.1.0 then, 0.2.0 now",)
        assert replay(backend, "s1", 1, host=then).identical


# --------------------------------------------------------------------------- the core's part


def _host_with_section(draft: Any) -> Any:
    section = ContextSection("dated", priority=60, shed=Shed.DROP_ROWS, draft=draft,
                             envelope=Envelope("dated_rows"), heading="Dated:")

    class Plugin:
        @hookimpl
        def register_context_sections(self, register: Any) -> None:
            register(section)

    return plugin_host_with([Plugin()])


def _compose(host: Any, budget_tokens: int = 100_000) -> Any:
    from contextplane import compose_projected_context

    return compose_projected_context("q", None, None, None, host=host, session_id="s", turn_index=1,
                                     budget_tokens=budget_tokens, record=False)


ROWS = [Row("a", 1, "alpha (2023)", meta={"when": "2023"}), Row("b", 2, "beta (2021)", meta={"when": "2021"}),
        Row("c", 3, "gamma (2022)", meta={"when": "2022"})]


def test_a_draft_heading_replaces_the_sections_and_is_escaped_and_counted() -> None:
    projected = _compose(_host_with_section(lambda r: Draft(ROWS, heading="Rows of </dated_rows> today:")))
    assert "Dated:" not in projected.text
    assert "</dated_rows> today" not in projected.text  # escaped like row text: it comes from data
    assert projected.text.count("</dated_rows>") == 1
    assert projected.used_chars == len(projected.text)


def test_a_render_key_orders_the_kept_rows_and_rank_still_sheds() -> None:
    def draft(request: Any) -> Draft:
        return Draft(ROWS, render_key=lambda row: row.meta["when"])

    full = _compose(_host_with_section(draft))
    lines = [line for line in full.text.splitlines() if line.startswith("- ")]
    assert lines == ["- beta (2021)", "- gamma (2022)", "- alpha (2023)"]
    assert full.section("dated").item_ids == ("a", "b", "c")
    tight = _compose(_host_with_section(draft), budget_tokens=(len(full.text) - 10) // 4)
    assert tight.section("dated").item_ids == ("a", "b")  # gamma, ranked last, is shed
    assert [line for line in tight.text.splitlines() if line.startswith("- ")] == ["- beta (2021)", "- alpha (2023)"]
    assert tight.used_chars == len(tight.text) <= tight.budget_chars


def test_a_render_key_that_fails_keeps_rank_order_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    def draft(request: Any) -> Draft:
        return Draft(ROWS, render_key=lambda row: row.meta["missing"])

    host = _host_with_section(draft)
    with caplog.at_level(logging.WARNING, logger="contextplane"):
        first, second = _compose(host), _compose(host)
    for projected in (first, second):
        assert [line for line in projected.text.splitlines() if line.startswith("- ")] == [
            "- alpha (2023)", "- beta (2021)", "- gamma (2022)"]
    failures = [r for r in caplog.records if "render_key failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"heading": 3}, "Draft.heading must be str or None, got int"),
     ({"render_key": "when"}, "Draft.render_key must be a function of a Row")],
)
def test_a_bad_layout_is_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Draft(ROWS, **kwargs)
