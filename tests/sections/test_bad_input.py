"""Bad input never breaks a turn (issue 10, Composition): text that cannot be encoded, a
provider that calls ``sys.exit()``, oversized rows, floors that do not fit, a floor larger than
a small model's window."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

from contextplane import ContextSection, Draft, Row, Shed, compose_projected_context
from contextplane.backends.sqlite import SQLiteBackend, SQLiteSessionSummaries
from contextplane.budget import budget_chars
from contextplane.config import structure
from contextplane.errors import SectionError, ValidationError
from contextplane.fitting import CUT_MARKER
from contextplane.notices import BudgetWarning
from contextplane_sections.envelopes import INJECTED_MEMORY

from .conftest import FakeStore, chunk, standard_host

SURROGATE = "\udcff"  # what surrogateescape makes of the byte 0xff


class ExitingPlugin:
    """A provider that calls ``sys.exit()`` from its draft."""

    plugin_name = "exits"

    @staticmethod
    def _draft(_request):
        sys.exit(3)

    from contextplane import hookimpl

    @hookimpl
    def register_context_sections(self, register) -> None:
        register(ContextSection("exits", 45, Shed.DROP_ROWS, self._draft, INJECTED_MEMORY))


def _compose(store, *, host=None, config=None, budget_tokens=0, skills=None, state=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compose_projected_context(
            "deploy window",
            store,
            skills,
            state if state is not None else {"goal": "Ship it"},
            budget_tokens=budget_tokens,
            host=host or standard_host(config),
            record=False,
            **kw,
        )


def test_a_lone_surrogate_in_working_state_or_a_skill_never_fails_the_turn(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "m.sqlite3")
    try:
        p = compose_projected_context(
            "deploy",
            backend,
            [("deploy", f"rolls out {SURROGATE} safely")],
            {"goal": f"ship {SURROGATE} it", "tasks": [f"ask {SURROGATE}"]},
            session_id="s-1",
            budget_tokens=0,
            host=standard_host(),
            record=True,  # the records observer hashes and writes the projection too
        )
    finally:
        backend.close()
    assert [s.error for s in p.sections] == [None] * len(p.sections)
    assert "- Goal: ship \ufffd it" in p.text and "- deploy: rolls out \ufffd safely" in p.text
    p.text.encode("utf-8")  # valid text all the way through
    assert all(s.sha256 for s in p.sections if s.chars)
    assert p.delivered_ids["working_state"] == ("goal", "tasks")


def test_text_that_cannot_be_encoded_is_refused_at_the_store_boundary(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "m.sqlite3")
    try:
        with pytest.raises(ValidationError) as caught:
            backend.memories.add_chunk(f"deploy {SURROGATE} window", source_type="operator")
        assert str(caught.value) == (
            "content: holds U+DCFF at character 7, a lone surrogate that is not text (bytes that are not "
            "UTF-8, decoded with surrogateescape); re-encode the input as UTF-8 or remove that character"
        )
        with pytest.raises(ValidationError, match=r"^heading: holds U\+D800 at character 0"):
            backend.memories.add_chunk("fine", heading="\ud800")
        with pytest.raises(ValidationError, match=r"^summary: holds U\+DCFF"):
            backend.summaries.add("s-1", f"bad {SURROGATE}")
        assert backend.memories.list_chunks() == [] and backend.summaries.count() == 0
        # A query is not stored: its surrogates simply match nothing.
        assert backend.memories.search(f"deploy {SURROGATE}") == []
    finally:
        backend.close()


def test_a_provider_calling_sys_exit_fails_only_its_section() -> None:
    store = FakeStore([chunk("1", "Deploy window: Tuesday", source_type="operator", delivery_policy="always")])
    host = standard_host(extra=[ExitingPlugin()])
    p = _compose(store, host=host)
    assert p.section("exits").error == "SystemExit: 3"
    assert p.section("always_on").item_ids == ("1",) and "Deploy window: Tuesday" in p.text
    with pytest.raises(SectionError, match=r"^context section 'exits' of plugin 'exits' failed: SystemExit: 3"):
        _compose(store, host=host, strict=True)


def test_a_prompt_section_or_observer_calling_sys_exit_is_isolated(tmp_path: Path) -> None:
    from contextplane import BuildContext, PromptSection, build_stable_prefix, hookimpl

    class Exits:
        plugin_name = "exits"

        @hookimpl
        def register_prompt_sections(self, register) -> None:
            register(PromptSection("bye", lambda _ctx: sys.exit("leaving"), after="operating_model"))

        @hookimpl
        def observe_projection(self, projection, request) -> None:
            sys.exit(4)

    host = standard_host(extra=[Exits()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prefix = build_stable_prefix(host, BuildContext(config=host.config))
        assert prefix.errors == (
            "prompt section 'bye' of plugin 'exits' failed: SystemExit: leaving",
        )
        assert "operating_model" in prefix.order
        backend = SQLiteBackend(tmp_path / "m.sqlite3")
        try:
            p = compose_projected_context("q", backend, None, {"goal": "g"}, host=host, session_id="s")
        finally:
            backend.close()
    assert p.section("working_state").item_ids == ("goal",)
    assert any(f.plugin == "exits" and f.stage == "observe_projection" for f in host.failures)


def test_one_oversized_memory_never_wipes_out_retrieval() -> None:
    # The reported case: retrieved rows of 74k, 33 and 24 chars under a 64,000-char budget
    # shed all three. Now the oversized row is cut to context.max_row_chars (one warning).
    rows = [
        chunk("big", "word " * 14_800, source_type="operator"),
        chunk("mid", "the deploy window is on Tuesday", source_type="operator"),
        chunk("low", "deploy freeze on Fridays", source_type="operator"),
    ]
    store = FakeStore(rows, search_order=["big", "mid", "low"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            p = compose_projected_context(
                "deploy", store, None, {}, budget_tokens=16_000, host=standard_host(), record=False
            )
    assert p.budget_chars == 64_000 and p.used_chars <= 64_000
    report = p.section("retrieved")
    assert report.item_ids == ("big", "mid", "low") and report.cut == ("big",) and report.truncated
    assert CUT_MARKER.split("{n}")[0] in p.text and p.text.count(" more chars]") == 1
    assert 4_000 - 300 < report.chars < 4_000 + 300  # the cut row, the two small ones, the heading
    cut_warnings = [str(w.message) for w in caught if "max_row_chars" in str(w.message)]
    assert cut_warnings == [
        "context section 'retrieved' of plugin 'contextplane_sections.retrieved' offered rows longer than "
        "context.max_row_chars (4000 chars), first 'big'; they are cut at a line boundary and end with a "
        "cut marker (raise context.max_row_chars, 0 = no bound, or store shorter rows)"
    ]


def test_without_a_row_bound_an_oversized_row_is_shed_alone(tmp_config) -> None:
    rows = [
        chunk("big", "word " * 14_800, source_type="operator"),
        chunk("mid", "the deploy window is on Tuesday", source_type="operator"),
        chunk("low", "deploy freeze on Fridays", source_type="operator"),
    ]
    store = FakeStore(rows, search_order=["big", "mid", "low"])
    p = _compose(store, config=tmp_config(context={"max_row_chars": 0}), budget_tokens=16_000, state={})
    assert p.section("retrieved").item_ids == ("mid", "low")  # the big row never takes them with it
    assert 0 < p.used_chars <= 64_000
    assert [(s.section, s.action, s.items) for s in p.overflow] == [("retrieved", "drop_row", 1)]


def test_a_20_mb_row_and_a_50k_skill_description_are_bounded(tmp_config) -> None:
    huge = ("a line of an enormous document\n" * 700_000)[:20_000_000]
    store = FakeStore([chunk("doc", huge, source_type="operator", delivery_policy="always")])
    p = _compose(store, skills=[("deploy", "d" * 50_000), ("rollback", "undo")], budget_tokens=16_000)
    always, skills = p.section("always_on"), p.section("skills")
    assert always.item_ids == ("doc",) and always.cut == ("doc",)
    assert always.chars < 4_500  # 4,000 chars of text, plus the heading, "- " and line indents
    assert skills.item_ids == ("deploy", "rollback") and skills.cut == ("deploy",)
    assert p.used_chars <= p.budget_chars
    assert "  [… cut: " in p.text  # the marker is a line of its own, at a line boundary
    line_before = p.text.split("  [… cut: ")[0].rsplit("\n", 2)[-2]
    assert line_before.endswith("a line of an enormous document")
    # The bound is a documented key with a floor of its own.
    with pytest.raises(Exception, match=r"invalid value for context.max_row_chars: expected 0 \(no bound\)"):
        tmp_config(context={"max_row_chars": 50})


def test_a_floored_budget_over_a_share_of_a_small_window_warns_once() -> None:
    config = structure({"context": {"context_window": 1_000}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert budget_chars(config) == 16_000  # the ADR floor is kept
        assert budget_chars(config) == 16_000
        assert budget_chars(structure({"context": {"context_window": 200_000}})) == 64_000
    messages = [str(w.message) for w in caught if issubclass(w.category, BudgetWarning)]
    assert messages == [
        "the projected-context budget is floored at context.budget_floor_chars (16000 chars, ~4000 "
        "tokens), 400% of the model's 1000-token context window (more than 25%); lower "
        "context.budget_floor_chars for a model this small"
    ]


def test_a_digest_entry_that_cannot_be_encoded_is_refused_and_the_digest_goes_on(tmp_path: Path) -> None:
    summaries = SQLiteSessionSummaries(tmp_path / "s.sqlite3")
    try:
        with pytest.raises(ValidationError):
            summaries.add("s-old", "x" + SURROGATE)
        summaries.add("s-old", "deploys went fine")
        from contextplane.testing.memory import InMemoryBackend

        store = FakeStore([])
        p = _compose(store, backend=InMemoryBackend(store, summaries=summaries), session_id="now")
    finally:
        summaries.close()
    assert p.section("prior_sessions").item_ids and "deploys went fine" in p.text


def test_draft_rows_that_cannot_be_laid_out_fail_only_their_section(monkeypatch) -> None:
    # Escaping is the core's, but if it ever raised for one section's rows, only that section
    # would be lost: the layout of the rows is part of the section's isolation.
    import contextplane.fitting as fitting

    real = fitting.escape_measured

    def explode(text: str):
        if "explode" in text:
            raise RuntimeError("cannot lay out this row")
        return real(text)

    monkeypatch.setattr(fitting, "escape_measured", explode)

    class Bad:
        plugin_name = "bad"
        from contextplane import hookimpl

        @hookimpl
        def register_context_sections(self, register) -> None:
            register(ContextSection("bad", 45, Shed.DROP_ROWS, lambda _r: Draft([Row("1", 1, "explode")]),
                                    INJECTED_MEMORY))

    p = _compose(FakeStore([]), host=standard_host(extra=[Bad()]))
    assert p.section("bad").error == "RuntimeError: cannot lay out this row"
    assert p.section("working_state").item_ids == ("goal",)


def test_a_lone_surrogate_in_a_prompt_section_is_repaired_not_fatal() -> None:
    from contextplane import BuildContext, PromptSection, build_stable_prefix, hookimpl

    class Odd:
        plugin_name = "odd"

        @hookimpl
        def register_prompt_sections(self, register) -> None:
            register(PromptSection("odd", lambda _ctx: f"Be kind {SURROGATE} always.", after="operating_model"))

    host = standard_host(extra=[Odd()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prefix = build_stable_prefix(host, BuildContext(config=host.config))
    assert "Be kind \ufffd always." in prefix.text and prefix.errors == ()
    assert len(prefix.sha256) == 64
