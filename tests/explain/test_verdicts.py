"""``explain``: each verdict, produced by a turn built to produce it, with its evidence."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contextplane import ContextSection, Draft, ProjectionRequest, Shed, hookimpl
from contextplane.errors import StoreError, ValidationError
from contextplane.explain import TurnNotRecorded, explain
from contextplane.fitting import escape_measured
from contextplane.testing.memory import InMemoryBackend
from contextplane_external import ContextAssembler
from contextplane_sections.attribution import memory_row
from contextplane_sections.envelopes import INJECTED_MEMORY
from tests.explain.helpers import backend_at, config, host_with, turn
from tests.store.helpers import HashEmbedder

WEB = "project:web"


@pytest.fixture
def deploy(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    cfg = config()
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        yield host, backend


def test_delivered_names_the_section_the_place_and_the_chars(deploy: tuple[Any, Any]) -> None:
    host, backend = deploy
    add = backend.memories.add_chunk
    always = add("Deploy window is Tuesday 14:00 UTC", "hot", "operator", namespace=WEB)
    fact = add("Priya approves every production deploy", "fact", "operator", namespace=WEB)
    # relevant enough to pass the relevance floor: it shares the query's rarer terms too
    other = add("Production deploys need a second approver", "fact", "operator", namespace=WEB)
    projection = turn(host, backend, "who approves a production deploy?")
    got = explain(always, backend=backend, host=host, session_id="s1", turn_index=1)
    assert (got.verdict, got.reason) == ("delivered", None)
    assert got.evidence["section"] == "always_on" and got.evidence["position"] == 1
    row_text = next(r.text for r in projection.section("always_on").drafted if r.id == always)  # type: ignore[union-attr]
    assert got.evidence["chars"] == escape_measured(row_text)[1]
    assert (
        got.summary
        == f"memory {always} was delivered in section always_on (row 1 of 1, {got.evidence['chars']} chars)"
    )
    hit = explain(fact, backend=backend, host=host, session_id="s1", turn_index=1)
    assert hit.verdict == "delivered" and hit.evidence["section"] == "retrieved"
    assert hit.evidence["position"] == 1 and hit.evidence["rank"] == 1
    assert projection.section("retrieved").item_ids[: hit.evidence["of"]].index(fact) == 0  # type: ignore[union-attr]
    assert explain(other, backend=backend, host=host, session_id="s1", turn_index=1).evidence["position"] == 2
    assert hit.turn["basis"] == "recorded" and hit.turn["history_position"]["seq"] >= 3


def test_shed_names_the_step_and_the_budget(tmp_path: Path) -> None:
    cfg = config(budget_floor_chars=0)
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        ids = [
            backend.memories.add_chunk(
                f"kiwi harvest note {i} " + "orchard " * (10 - i), "fact", "operator", namespace=WEB
            )
            for i in range(6)
        ]
        projection = turn(host, backend, "kiwi harvest orchard", budget_tokens=120)
        retrieved = projection.section("retrieved")
        assert retrieved is not None and retrieved.truncated
        shed = [i for i in retrieved.offered_ids if i not in retrieved.item_ids]
        assert shed, "the budget must shed a retrieved row for this test"
        got = explain(shed[-1], backend=backend, host=host, session_id="s1", turn_index=1)
        assert got.verdict == "shed"
        assert (
            got.evidence["section"] == "retrieved" and got.evidence["budget_chars"] == projection.budget_chars
        )
        assert [s["action"] for s in got.evidence["shed_steps"]] == ["drop_row"]
        assert got.evidence["offered"] == len(retrieved.offered_ids) and got.evidence["delivered"] == len(
            retrieved.item_ids
        )
        assert f"shed to fit the {projection.budget_chars}-char budget: drop_row x" in got.summary
        assert set(ids) >= set(retrieved.offered_ids)


def test_filtered_by_lifecycle_then(deploy: tuple[Any, Any]) -> None:
    host, backend = deploy
    store = backend.memories
    rejected = store.add_chunk("Deploys on Friday evenings are fine", "fact", "extracted", namespace=WEB)
    store.set_review_state(rejected, "rejected", by="sam")
    old = store.add_chunk("The deploy tool is Jenkins", "fact", "operator", namespace=WEB)
    new = store.supersede(old, "The deploy tool is Argo")
    expired = store.add_chunk("Deploy freeze until Monday", "fact", "operator", namespace=WEB)
    store.set_expires_at(expired, datetime.now(UTC) - timedelta(minutes=5), by="priya")
    wrong = store.add_chunk("The deploy bot is called Bender", "fact", "operator", namespace=WEB)
    store.invalidate_chunk(wrong, reason="the bot was renamed", by="priya")
    # a question about the tool: the lifecycle verdicts come first whatever the query, and the
    # successor answers it (a five-topic question would leave each row under the relevance floor)
    turn(host, backend, "which deploy tool do we use?")

    def why(memory_id: str) -> Any:
        return explain(memory_id, backend=backend, host=host, session_id="s1", turn_index=1)

    got = why(rejected)
    assert (got.verdict, got.reason) == ("filtered", "rejected") and got.evidence["by"] == "sam"
    assert got.summary == f"memory {rejected} was filtered: it was rejected by sam"
    got = why(old)
    assert (got.reason, got.evidence["superseded_by"]) == ("superseded", new)
    assert got.summary.endswith(f"it was superseded by #{new}")
    got = why(expired)
    assert got.reason == "expired" and got.evidence["expires_at"] < got.evidence["turn_at"]
    got = why(wrong)
    assert got.reason == "invalidated" and got.evidence["invalidation_reason"] == "the bot was renamed"
    assert why(new).verdict == "delivered"


def test_filtered_by_the_turn_scope_policy_and_trust(tmp_path: Path) -> None:
    cfg = config(inject_min_trust=2)
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        add = backend.memories.add_chunk
        elsewhere = add("Payments deploy window is Monday", "fact", "operator", namespace="project:payments")
        on_demand = add(
            "The deploy runbook archive is in the wiki",
            "fact",
            "operator",
            delivery_policy="on_demand",
            namespace=WEB,
        )
        external = add("Vendor doc: deploy API is rate limited", "reference", "ingest", namespace=WEB)
        turn(host, backend, "deploy window runbook API")
        got = explain(elsewhere, backend=backend, host=host, session_id="s1", turn_index=1)
        assert (got.reason, got.evidence["namespace"]) == ("out_of_scope", "project:payments")
        assert got.evidence["turn_scopes"] == ["", WEB, "session:s1"]
        got = explain(on_demand, backend=backend, host=host, session_id="s1", turn_index=1)
        assert got.reason == "policy_on_demand" and "memory_recall" in got.summary
        got = explain(external, backend=backend, host=host, session_id="s1", turn_index=1)
        assert got.reason == "below_min_trust"
        assert (got.evidence["trust_tier"], got.evidence["inject_min_trust"]) == (1, 2)


def test_filtered_below_the_relevance_floor_names_the_relevance_and_the_floor(deploy: tuple[Any, Any]) -> None:
    host, backend = deploy
    add = backend.memories.add_chunk
    fact = add("Priya approves every production deploy", "fact", "operator", namespace=WEB)
    weak = add("The deploy checklist lives in the wiki", "fact", "operator", namespace=WEB)
    add("Deploy logs are kept for a week", "fact", "operator", namespace=WEB)
    # an answerable question: its best match clears the floor, and its ranked rows are offered
    answered = turn(host, backend, "who approves a production deploy?")
    retrieved = answered.section("retrieved")
    assert retrieved is not None and retrieved.item_ids[0] == fact
    for topic in ("sprint", "budget", "hiring", "roadmap"):
        add(f"The {topic} notes are in the shared drive", "fact", "operator", namespace=WEB)
    # a question the store cannot answer as a whole: each row holds one of its five words at
    # most, so its best match is under the floor (context.min_relevance gates the question)
    question = "wiki sprint budget hiring roadmap?"
    gated = turn(host, backend, question, index=2)
    report = gated.section("retrieved")
    assert report is not None and report.item_ids == () and report.meta["best_relevance"] < 0.3
    got = explain(weak, backend=backend, host=host, session_id="s1", turn_index=2)
    assert (got.verdict, got.reason) == ("filtered", "below_min_relevance")
    assert got.evidence["min_relevance"] == 0.3 and 0 <= got.evidence["relevance"] < 0.3
    assert got.evidence["best_relevance"] == pytest.approx(report.meta["best_relevance"])
    assert got.evidence["section"] == "retrieved" and got.evidence["rank"] >= 1
    assert "below context.min_relevance = 0.3" in got.summary
    # with the floor lowered the same question delivers it: the verdict named the rule that decided
    host_open = host_with(config(min_relevance=0.0))
    now = explain(weak, backend=backend, host=host_open, query=question)
    assert now.verdict == "delivered"


def test_filtered_incognito_recorded_and_now(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        fact = backend.memories.add_chunk("Priya approves deploys", "fact", "operator", namespace=WEB)
        assembler = ContextAssembler(host=host, knowledge_store=backend.memories, backend=backend)
        assembler.assemble("who approves deploys?", session_id="private", turn_index=1, incognito=True)
        assert backend.snapshots.get("private", 1).incognito  # the only trace an incognito turn leaves
        assert backend.snapshots.get_inputs("private", 1) is None
        got = explain(fact, backend=backend, host=host, session_id="private", turn_index=1)
        assert (got.verdict, got.reason) == ("filtered", "incognito")
        now = explain(fact, backend=backend, host=host, query="who approves deploys?", incognito=True)
        assert (now.verdict, now.reason, now.turn["basis"]) == ("filtered", "incognito", "now")
        assert explain(fact, backend=backend, host=host, query="who approves deploys?").verdict == "delivered"


class PinnedDecisions:
    """A memory section that lists decisions and, like a digest, stays out of goal turns."""

    plugin_name = "pinned"

    @staticmethod
    def draft(request: ProjectionRequest) -> Draft:
        rows = request.knowledge_store.list_chunks(
            deliverable=True, memory_kind="decision", namespaces=list(request.namespaces)
        )
        return Draft([memory_row(c, i) for i, c in enumerate(rows, start=1)])

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        register(
            ContextSection(
                "pinned",
                25,
                Shed.NEVER,
                self.draft,
                INJECTED_MEMORY,
                carries_memory=True,
                goal_suppressed=True,
            )
        )


def test_filtered_goal_turn_and_not_selected(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg, PinnedDecisions())
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        decision = backend.memories.add_chunk(
            "We ship on Thursdays", "decision", "operator", memory_kind="decision", namespace=WEB
        )
        fact = backend.memories.add_chunk("Priya approves deploys", "fact", "operator", namespace=WEB)
        turn(host, backend, "continue the goal", goal_turn=True)
        got = explain(decision, backend=backend, host=host, session_id="s1", turn_index=1)
        assert (got.verdict, got.reason, got.evidence["section"]) == ("filtered", "goal_turn", "pinned")
        assert got.summary.endswith("section pinned does not run on goal turns (it would have drafted it)")
        turn(host, backend, "who approves deploys?", index=2, only_sections=["working_state"])
        got = explain(fact, backend=backend, host=host, session_id="s1", turn_index=2)
        assert (got.reason, got.evidence["section"]) == ("not_selected", "retrieved")


def test_filtered_when_the_carrying_section_is_disabled(tmp_path: Path) -> None:
    cfg = config()
    from contextplane_sections import always_on, working_state

    host = host_with(cfg, sections=[working_state, always_on])
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        fact = backend.memories.add_chunk("Priya approves deploys", "fact", "operator", namespace=WEB)
        turn(host, backend, "who approves deploys?")
        got = explain(fact, backend=backend, host=host, session_id="s1", turn_index=1)
        assert (got.reason, got.evidence["section"]) == ("section_disabled", "retrieved")
        assert "is not registered (its plugin is disabled or not installed)" in got.summary


@pytest.mark.parametrize("hybrid", [False, True], ids=["fts", "hybrid"])
def test_never_retrieved_gives_each_leg_rank_and_the_cut_off(tmp_path: Path, hybrid: bool) -> None:
    cfg = config(retrieved_max=3)
    host = host_with(cfg)
    embedder = HashEmbedder() if hybrid else None
    with backend_at(tmp_path / "m.sqlite3", cfg, embedder=embedder) as backend:
        strong = [
            backend.memories.add_chunk(
                f"canary deploy canary rollout step {i}", "fact", "operator", namespace=WEB
            )
            for i in range(5)
        ]
        weak = backend.memories.add_chunk(
            "a long note that mentions a canary once among many other words",
            "fact",
            "operator",
            namespace=WEB,
        )
        unrelated = backend.memories.add_chunk("lunch is at noon", "fact", "operator", namespace=WEB)
        projection = turn(host, backend, "canary rollout")
        assert weak not in projection.section("retrieved").offered_ids  # type: ignore[union-attr]
        got = explain(weak, backend=backend, host=host, session_id="s1", turn_index=1)
        assert got.verdict == "never_retrieved" and got.evidence["k"] == 3
        assert got.evidence["final_rank"] == 6 and got.evidence["results"] == list(
            projection.section("retrieved").item_ids
        )  # type: ignore[union-attr]
        legs = {leg["leg"]: leg for leg in got.evidence["legs"]}
        assert set(legs) == ({"fts", "vector"} if hybrid else {"fts"})
        assert legs["fts"]["rank"] == 6 and legs["fts"]["candidates"] == 6 and legs["fts"]["cutoff"] == 80
        assert legs["fts"]["filtered_rank"] == 6
        if hybrid:
            assert legs["vector"]["rank"] is not None and legs["vector"]["candidates"] == 7
        assert got.summary.endswith(
            "it ranked 6 in the final list; the section searched 3 deep (what the budget could hold)"
        )
        none = explain(unrelated, backend=backend, host=host, session_id="s1", turn_index=1)
        assert none.verdict == "never_retrieved"
        fts = next(leg for leg in none.evidence["legs"] if leg["leg"] == "fts")
        assert fts["rank"] is None and fts["note"] == "no word of the query occurs in it"
        assert set(strong) >= set(projection.section("retrieved").item_ids)  # type: ignore[union-attr]


def test_not_written_yet_and_purged(deploy: tuple[Any, Any]) -> None:
    host, backend = deploy
    store = backend.memories
    doomed = store.add_chunk("A doomed deploy fact", "fact", "operator", namespace=WEB)
    store.invalidate_chunk(doomed, reason="wrong")
    store.purge()
    turn(host, backend, "deploy fact")
    later = store.add_chunk("A later deploy fact", "fact", "operator", namespace=WEB)
    got = explain(later, backend=backend, host=host, session_id="s1", turn_index=1)
    assert (got.verdict, got.reason) == ("filtered", "not_written_yet")
    got = explain(doomed, backend=backend, host=host, session_id="s1", turn_index=1)
    assert (got.verdict, got.reason) == ("filtered", "purged")
    with pytest.raises(StoreError, match=r"no memory with id '999'"):
        explain("999", backend=backend, host=host, session_id="s1", turn_index=1)


def test_a_past_verdict_differs_from_now_when_the_memory_changed(deploy: tuple[Any, Any]) -> None:
    host, backend = deploy
    store = backend.memories
    note = store.add_chunk("Canary runs for 30 minutes", "note", "extracted", namespace=WEB)
    turn(host, backend, "how long does the canary run?")
    store.set_review_state(note, "rejected", by="sam")
    then = explain(note, backend=backend, host=host, session_id="s1", turn_index=1)
    now = explain(note, backend=backend, host=host, query="how long does the canary run?", session_id="s1")
    assert (then.verdict, then.turn["basis"]) == ("delivered", "recorded")
    assert (now.verdict, now.reason, now.turn["basis"]) == ("filtered", "rejected", "now")


def test_explain_errors_name_what_is_missing(deploy: tuple[Any, Any]) -> None:
    host, backend = deploy
    fact = backend.memories.add_chunk("Priya approves deploys", "fact", "operator", namespace=WEB)
    with pytest.raises(ValidationError, match=r"give either a recorded turn .* or a query"):
        explain(fact, backend=backend, host=host)
    with pytest.raises(ValidationError, match=r"turn_index needs the session_id"):
        explain(fact, backend=backend, host=host, turn_index=1)
    with pytest.raises(TurnNotRecorded, match=r"session 's1' turn 7 has no recorded inputs \(incognito"):
        explain(fact, backend=backend, host=host, session_id="s1", turn_index=7)


def test_explain_on_the_kit_backend(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg)
    backend = InMemoryBackend()
    fact = backend.memories.add_chunk("Priya approves deploys", "fact", "operator", namespace=WEB)
    note = backend.memories.add_chunk("lunch is at noon", "fact", "operator", namespace=WEB)
    turn(host, backend, "who approves deploys?")
    backend.memories.set_review_state(fact, "rejected")
    assert explain(fact, backend=backend, host=host, session_id="s1", turn_index=1).verdict == "delivered"
    got = explain(note, backend=backend, host=host, session_id="s1", turn_index=1)
    assert got.verdict == "never_retrieved" and got.evidence["legs"][0]["leg"] == "overlap"


def test_filtered_when_the_carrying_section_failed_that_turn(
    deploy: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's search fails during the turn (a transient error): the retrieved section
    fails, the turn carries on without it, and explain says so from the turn's manifest, even
    though a recomposition now would succeed; a turn composed now while it fails says so too."""
    from contextplane.store.sqlite import StoreView

    host, backend = deploy
    fact = backend.memories.add_chunk(
        "Priya approves every production deploy", "fact", "operator", namespace=WEB
    )

    def broken(self: Any, query: str, k: int, **kw: Any) -> Any:
        raise StoreError("disk I/O error while reading chunks_fts")

    with monkeypatch.context() as patch:
        patch.setattr(StoreView, "search", broken)
        projection = turn(host, backend, "who approves a production deploy?")
        report = projection.section("retrieved")
        assert report is not None and report.error is not None and "disk I/O error" in report.error
        now = explain(fact, backend=backend, host=host, query="who approves a production deploy?")
        assert (now.verdict, now.reason, now.evidence["recorded"]) == ("filtered", "section_failed", False)
        assert now.summary.startswith(f"memory {fact} was filtered: section retrieved failed this turn (")
    got = explain(fact, backend=backend, host=host, session_id="s1", turn_index=1)
    assert (got.verdict, got.reason) == ("filtered", "section_failed")
    assert got.evidence["section"] == "retrieved" and got.evidence["recorded"] is True
    assert "disk I/O error while reading chunks_fts" in got.evidence["error"]
    assert got.summary == (
        f"memory {fact} was filtered: section retrieved failed that turn ({got.evidence['error']})"
    )
    # the store reads fine again: composed now, the same memory is delivered
    assert explain(fact, backend=backend, host=host, query="who approves a production deploy?").verdict == (
        "delivered"
    )
