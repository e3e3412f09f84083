"""The LoCoMo benchmark's scoring and parsing (bench/locomo_scoring.py, bench/locomo_data.py), on
made-up rows: the benchmark's figures are only as good as these. No LoCoMo data is read."""

from __future__ import annotations

import gzip
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from contextplane import compose_projected_context
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.plugins import get_host

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from locomo_data import parse
from locomo_scoring import (
    GATED,
    PAST_BUDGET,
    UNDER_ROW_FLOOR,
    UNDER_TRUST,
    Overhead,
    delivered_turns,
    evidence_recall,
    fit_overhead,
    order_measure,
    recall_at,
    unoffered_verdict,
)


def test_evidence_recall_is_the_share_delivered_and_all_only_when_every_turn_is() -> None:
    assert evidence_recall(["D1:1", "D2:2", "D9:9"], ["D1:1", "D3:3"]) == (0.5, False)
    assert evidence_recall(["D1:1", "D3:3"], ["D1:1", "D3:3"]) == (1.0, True)
    assert evidence_recall([], ["D1:1"]) == (0.0, False)
    with pytest.raises(ValueError, match="without evidence"):
        evidence_recall(["D1:1"], [])


def test_recall_at_k_counts_only_the_first_k() -> None:
    ranked = ["D1:5", "D1:6", "D1:1", "D1:2"]
    assert recall_at(ranked, ["D1:1", "D1:2"], 2) == 0.0
    assert recall_at(ranked, ["D1:1", "D1:2"], 3) == 0.5


def test_a_deduplicated_memory_stands_for_every_turn_it_holds() -> None:
    id_map = {"7": ["D1:3", "D4:2"], "8": ["D1:4"]}
    assert delivered_turns(["7"], id_map) == {"D1:3", "D4:2"}
    assert delivered_turns(["9"], id_map) == set()


def test_packing_takes_ranked_rows_while_they_fit_and_stops_at_the_first_that_does_not() -> None:
    overhead = Overhead(fixed=100, per_row=10)
    # room 250 - 100 = 150: two rows of 50 + 10 fit (120), the third would need 180
    assert overhead.pack([50, 50, 50], 250) == 2
    # a short row after one that does not fit is not taken: our section sheds the lowest ranks
    assert overhead.pack([50, 200, 10], 250) == 1
    assert overhead.pack([50, 200, 10], None) == 3
    assert overhead.pack([500], 250) == 0
    assert overhead.used_chars([50, 50]) == 220
    assert overhead.used_chars([]) == 0


def test_a_weak_row_of_an_answered_question_was_cut_by_the_budget_not_by_the_floor() -> None:
    """The relevance floor gates the question (its best hit), not each row: a row at 0.1 of a
    question whose best hit reaches 0.8 was not offered because the rows above it filled the
    budget (the diagnosis had counted it as "cut by min_relevance")."""
    rules = {"floor": 0.3, "row_floor": 0.0, "min_trust": 0}
    assert unoffered_verdict(0.1, 0.8, 1, **rules) == PAST_BUDGET
    assert unoffered_verdict(0.1, 0.25, 1, **rules) == GATED
    assert unoffered_verdict(0.1, 0.8, 1, **{**rules, "row_floor": 0.2}) == UNDER_ROW_FLOOR
    assert unoffered_verdict(0.9, 0.9, 0, **{**rules, "min_trust": 1}) == UNDER_TRUST


def test_the_overhead_fit_recovers_the_renderer_costs() -> None:
    samples = [(n, 90 * n + 7 * (n % 3), 253 + 62 * n + 90 * n + 7 * (n % 3)) for n in range(1, 12)]
    fitted = fit_overhead(samples)
    assert fitted.fixed == pytest.approx(253)
    assert fitted.per_row == pytest.approx(62)
    assert fitted.r2 == pytest.approx(1.0)
    # one row count only: no slope to fit, so every overhead char is charged per row
    single = fit_overhead([(4, 400, 400 + 4 * 70 + 20), (4, 300, 300 + 4 * 70 + 20)])
    assert (single.fixed, single.per_row) == (0.0, 75.0)
    with pytest.raises(ValueError, match="no composed projection"):
        fit_overhead([(0, 0, 0)])


def test_the_fitted_overhead_predicts_what_our_projection_measures(tmp_path: Path) -> None:
    """The fairness claim of the baselines: rows packed with the fitted overhead cost what the
    retrieved section's rendering of the same rows costs."""
    host = get_host()
    backend = SQLiteBackend(tmp_path / "m.sqlite3", config=host.config)
    words = ["harbour", "lantern", "orchard", "glacier", "meadow", "canyon", "quarry", "delta"]
    texts = [f"Ana: the {w} trip was {'long ' * (i % 5)}and the {w} map is in the blue folder {i}"
             for i, w in enumerate(words * 3)]
    ids = backend.memories.add_chunks({"content": t, "namespace": "project:p"} for t in texts)
    contents = dict(zip(ids, texts, strict=True))
    samples = []
    projections = []
    for i, w in enumerate(words):
        for budget in (120, 200, 400):
            p = compose_projected_context(f"where is the {w} map?", backend, None, None, session_id="s",
                                          turn_index=i, budget_tokens=budget, project="p", record=False, host=host)
            delivered = p.delivered_ids.get("retrieved", ())
            samples.append((len(delivered), sum(len(contents[d]) for d in delivered), p.used_chars))
            projections.append((delivered, p.used_chars))
    assert len({n for n, _, _ in samples}) > 1, "the made-up rows must give different row counts"
    overhead = fit_overhead(samples)
    for delivered, used in projections:
        if delivered:
            assert abs(overhead.used_chars([len(contents[d]) for d in delivered]) - used) <= 8
    backend.close()


def test_parse_takes_speaker_caption_session_date_and_every_id_an_evidence_entry_names() -> None:
    record = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "Look at this."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a photo of a red kite"},
            ],
            "session_2_date_time": "not a date",
            "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "Back again."}],
        },
        "qa": [
            {"question": "What did Bo share?", "evidence": ["D1:2"], "category": 4},
            {"question": "Both?", "evidence": ["D1:1; D2:1", "D7:3", "D"], "category": 1},
            {"question": "None?", "evidence": [], "category": 3},
        ],
    }
    conv = parse(record)
    assert [t.content for t in conv.turns] == [
        "Ana: Look at this.", "Bo: Nice! [shared a photo: a photo of a red kite]", "Ana: Back again."]
    assert conv.turns[0].said_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert conv.turns[2].said_at is None
    assert [q.evidence for q in conv.questions] == [("D1:2",), ("D1:1", "D2:1"), ()]
    assert conv.unknown_evidence == 2


# ----------------------------------------------------------------------------- the bench end to end


def made_up_locomo(path: Path) -> Path:
    """A LoCoMo-shaped file of two made-up conversations: each turn names one thing, each
    question asks about one or two of them."""
    things = ["harbour", "lantern", "orchard", "glacier", "meadow", "canyon", "quarry", "delta", "summit",
              "lagoon", "prairie", "tundra", "marsh", "valley", "island", "forest", "desert", "plateau"]
    records = []
    for c, who in enumerate((("Ana", "Bo"), ("Cy", "Di"))):
        conv: dict[str, object] = {"speaker_a": who[0], "speaker_b": who[1]}
        qa = []
        for s in (1, 2):
            conv[f"session_{s}_date_time"] = f"1:56 pm on {s + 7} May, 2023"
            turns = []
            for t, thing in enumerate(things, start=1):
                turns.append({"speaker": who[t % 2], "dia_id": f"D{s}:{t}",
                              "text": f"In session {s} I saw the {thing}{c} and it was {'very ' * (t % 4)}calm."})
            conv[f"session_{s}"] = turns
            for t, thing in enumerate(things[:6], start=1):
                qa.append({"question": f"When did they see the {thing}{c}?", "evidence": [f"D{s}:{t}"], "category": 1 + t % 4})
        qa.append({"question": f"Which one, the {things[0]}{c} or the {things[1]}{c}?",
                   "evidence": ["D1:1", "D1:2"], "category": 1})
        records.append({"sample_id": f"conv-{c}", "conversation": conv, "qa": qa})
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(records, handle)
    return path


def run_bench(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    import locomo_bench

    monkeypatch.setattr(sys, "argv", ["locomo_bench.py", *argv])
    return locomo_bench.main()


def test_the_bench_measures_a_made_up_file_and_its_control_collapses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = made_up_locomo(tmp_path / "made-up.json.gz")
    out = tmp_path / "figures.json"
    code = run_bench(monkeypatch, "--data", str(data), "--mode", "fts", "--budgets", "100", "1000", "default",
                     "--diagnose", "--json", str(out))
    printed = capsys.readouterr().out
    assert code == 0, printed
    report = json.loads(out.read_text())
    ours = report["results"]["contextplane full text"]
    assert report["questions"] == 26
    # a question names its turn's one distinctive word: full text finds every one at 1,000 tokens
    assert ours["overall (1-4)"]["1,000 tok"]["evidence_recall"] == 1.0
    # a 100-token budget holds about two rows: recall drops, and the baseline packs as few
    assert ours["budgets"]["100 tok"]["rows_delivered"] < ours["budgets"]["1,000 tok"]["rows_delivered"]
    assert report["results"]["BM25, packed"]["budgets"]["100 tok"]["tokens_delivered"] <= 100
    assert report["controls"]["fts"]["100 tok"]["shuffled"] < 0.2
    assert "collapsed" in printed and "| delivered |" in printed
    # every question here is answered: no evidence turn is put down to the question's gate
    assert all(v[GATED] == 0 for v in report["diagnostics"]["fts"].values())


def test_the_bench_fails_when_its_control_does_not_collapse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scoring that ignored which ids were delivered (here: a "shuffled" map that is the real
    one) must fail the run, not pass it."""
    import locomo_bench

    data = made_up_locomo(tmp_path / "made-up.json.gz")
    monkeypatch.setattr(locomo_bench, "shuffled_map", lambda ing, rng: ing.id_map)
    code = run_bench(monkeypatch, "--data", str(data), "--mode", "fts", "--budgets", "1000",
                     "--json", str(tmp_path / "figures.json"))
    assert code == 1
    assert "DID NOT COLLAPSE" in capsys.readouterr().out


def test_the_bench_skips_with_one_line_when_the_data_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_bench(monkeypatch, "--data", str(tmp_path / "absent.json.gz")) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and "absent" in printed[0]


def test_an_override_must_name_a_real_config_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = made_up_locomo(tmp_path / "made-up.json.gz")
    with pytest.raises(SystemExit, match="retreived_k"):
        run_bench(monkeypatch, "--data", str(data), "--set", "context.retreived_k=5")


def test_compare_sets_a_previous_run_beside_this_one_question_by_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = made_up_locomo(tmp_path / "made-up.json.gz")
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    common = ("--data", str(data), "--mode", "fts", "--budgets", "100", "1000")
    assert run_bench(monkeypatch, *common, "--retrieved-k", "1", "--json", str(before)) == 0
    capsys.readouterr()
    assert run_bench(monkeypatch, *common, "--compare", str(before), "--json", str(after)) == 0
    printed = capsys.readouterr().out
    old = json.loads(before.read_text())["results"]["contextplane full text"]["overall (1-4)"]["1,000 tok"]
    new = json.loads(after.read_text())["results"]["contextplane full text"]["overall (1-4)"]["1,000 tok"]
    assert old["evidence_recall"] < new["evidence_recall"]  # one row a question vs up to eight
    assert f"{old['evidence_recall']:.3f} → {new['evidence_recall']:.3f}" in printed
    assert "questions, contextplane full text: 100 tok:" in printed and "0 lost" in printed


def test_the_order_measure_tells_rank_from_time_order() -> None:
    said = {"a": 0, "b": 1, "c": 2, "d": 3}
    # evidence b and d delivered; rank order put d first, time order b first
    by_rank = order_measure([(["d", "a", "b", "c"], ["b", "d"])], said)
    by_time = order_measure([(["a", "b", "c", "d"], ["b", "d"])], said)
    assert by_rank.in_time_order == 0.0 and by_time.in_time_order == 1.0
    assert by_rank.position == pytest.approx((0 + 2 / 3) / 2)
    assert by_time.position == pytest.approx((1 / 3 + 1) / 2)
    assert (by_rank.questions, by_rank.pairs) == (1, 1)
    none = order_measure([(["a"], ["z"])], said)
    assert none.questions == 0 and math.isnan(none.position)
