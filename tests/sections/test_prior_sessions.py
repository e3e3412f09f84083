"""The prior-session digest (ADR D9): exclusion, policies and the relevance gate, suppression, caching."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from contextplane import compose_projected_context
from contextplane.backends.sqlite import SQLiteSessionSummaries as SessionSummaries
from contextplane.testing.memory import InMemoryBackend

from .conftest import FakeStore, standard_host


class SpySummaries(SessionSummaries):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.loads: list[str] = []

    def newest(self, limit, *, exclude_session=None):
        self.loads.append("newest")
        return super().newest(limit, exclude_session=exclude_session)

    def relevant(self, query, limit, *, exclude_session=None):
        self.loads.append("relevant")
        return super().relevant(query, limit, exclude_session=exclude_session)


@pytest.fixture
def spy(tmp_path: Path) -> SpySummaries:
    s = SpySummaries(tmp_path / "s.sqlite3")
    s.add("s-1", "Chose Alembic for database migrations.", topic="database", at="2026-11-01T00:00:00+00:00")
    s.add("s-2", "Agreed the Tuesday deploy window.", topic="deploys", at="2026-11-02T00:00:00+00:00")
    s.add("s-3", "Tuned CDN purges.", topic="cdn", at="2026-11-03T00:00:00+00:00")
    s.add("s-active", "The active session's own summary.", topic="deploys", at="2026-11-04T00:00:00+00:00")
    return s


def digest(spy, config, query="deploy window", session="s-active", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = FakeStore([])
        p = compose_projected_context(
            query,
            store,
            [],
            {},
            session_id=session,
            budget_tokens=kw.pop("budget_tokens", 0),
            host=standard_host(config),
            record=False,
            backend=InMemoryBackend(store, summaries=spy),
            **kw,
        )
    return p, p.section("prior_sessions")


def sessions(report) -> list[str]:
    return [i.split(":")[1] for i in report.item_ids]


def test_active_session_is_never_its_own_prior_session(spy, tmp_config) -> None:
    p, report = digest(spy, tmp_config())
    assert sessions(report) == ["s-3", "s-2", "s-1"]
    assert "own summary" not in p.text
    _, other = digest(spy, tmp_config(), session="s-9")
    assert sessions(other) == ["s-active", "s-3", "s-2", "s-1"]


def test_cache_never_bakes_one_sessions_exclusion_into_another(spy, tmp_config) -> None:
    config = tmp_config(context={"prior_sessions_limit": 3})
    _, first = digest(spy, config, session="s-3")
    _, second = digest(spy, config, session="s-active")
    assert sessions(first) == ["s-active", "s-2", "s-1"]
    assert sessions(second) == ["s-3", "s-2", "s-1"]
    assert spy.loads == ["newest"]  # the second call was served from the cache, filtered afresh


def test_entries_carry_session_id_and_timestamp(spy, tmp_config) -> None:
    p, _ = digest(spy, tmp_config())
    assert (
        "- session s-2 @ 2026-11-02T00:00:00+00:00 (session) [deploys]: Agreed the Tuesday deploy window."
        in p.text
    )


def test_relevant_ranks_by_full_text_search(spy, tmp_config) -> None:
    _, report = digest(spy, tmp_config(context={"prior_sessions": "relevant"}), query="database migrations")
    assert sessions(report)[0] == "s-1"
    assert "gate" not in report.meta and report.meta["policy"] == "relevant"


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("", "closed (empty query: nothing to measure overlap with)"),
        ("kubernetes quota", "closed (no prior session overlaps the query)"),
    ],
)
def test_relevant_gates_the_digest_and_says_why(spy, tmp_config, query, why) -> None:
    # ADR D9: the digest is injected only when the turn overlaps a prior session; no fallback.
    p, report = digest(spy, tmp_config(context={"prior_sessions": "relevant"}), query=query)
    assert report.meta["gate"] == why
    assert report.item_ids == () and "<prior_sessions>" not in p.text
    assert spy.loads == ([] if not query else ["relevant"])  # newest is never consulted


def test_hostile_query_text_does_not_break_relevance(spy, tmp_config) -> None:
    _, report = digest(
        spy, tmp_config(context={"prior_sessions": "relevant"}), query='deploy" NEAR( AND * ) 🚀'
    )
    assert report.error is None and sessions(report)[0] == "s-2"


def test_off_never_calls_the_loader(spy, tmp_config) -> None:
    _, report = digest(spy, tmp_config(context={"prior_sessions": "off"}))
    assert report.item_ids == () and report.meta == {"policy": "off"} and spy.loads == []


@pytest.mark.parametrize("mode", ["goal_turn", "incognito"])
def test_goal_turns_and_incognito_never_call_the_loader(spy, tmp_config, mode) -> None:
    p, report = digest(spy, tmp_config(), **{mode: True})
    assert report.suppressed == mode and spy.loads == [] and "<prior_sessions>" not in p.text


def test_digest_competes_for_the_budget_and_sheds_oldest_first(spy, tmp_config) -> None:
    p, _ = digest(spy, tmp_config())
    one_entry = max(len(line) + 1 for line in p.text.splitlines() if line.startswith("- session "))
    _, shed = digest(spy, tmp_config(), budget_tokens=-(-(p.used_chars - one_entry) // 4))
    assert sessions(shed) == ["s-3", "s-2"]
    assert shed.truncated


def test_summaries_reject_bad_input(spy) -> None:
    from contextplane import ValidationError

    with pytest.raises(ValidationError, match="summary: expected text"):
        spy.add("s-x", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="must not be empty"):
        spy.add(" ", "text")
    assert spy.count() == 4
