"""The LoCoMo benchmark's scoring and parsing (bench/locomo_scoring.py, bench/locomo_data.py), on
made-up rows: the benchmark's figures are only as good as these. No LoCoMo data is read."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from contextplane import compose_projected_context
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.plugins import get_host

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from locomo_data import parse  # noqa: E402
from locomo_scoring import Overhead, delivered_turns, evidence_recall, fit_overhead, recall_at  # noqa: E402


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
