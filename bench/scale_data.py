"""The corpus, queries and embedder of bench/scale_bench.py. Deterministic (seeded), no network.

- ``corpus(n)``: memories of about 400 characters written like notes: about 40% English
  function words ("the", "we", "to", ...) between content words drawn with Zipf(1.05) weights
  from a vocabulary of 30,000 pseudo-word stems, each used in one of four inflections (bare,
  "-s", "-ed", "-ing"), so a stemming tokenizer has something to do and a plain one does not
  match "deploys" to "deploy". A few stems are corpus-specific words common enough to carry
  no information (the top of the Zipf curve), as real notes have.
- ``queries(texts, count)``: natural-language questions of 8 to 15 words, each about one
  target memory: 2 to 4 of the target's distinctive content words (drawn from its 8 rarest
  stems, often in another inflection), half the time one of its common words too, framed by
  function words ("what did we decide about ... for the ..."), plus one content word from
  elsewhere (noise). The relevance figure is the share of queries whose target is
  delivered.
- ``off_corpus_queries(count)``: questions whose content words are in no memory ("what is the
  weather like in lisbon tomorrow"): a projection for them should inject no retrieved memory.
- ``HashingEmbedder``: a TF-IDF feature-hashing embedder (each content word's crude stem maps
  to a fixed random direction, weighted by its IDF over the corpus it was fitted on; a text
  is the normalised sum, function words left out). It
  is a real embedder in the sense the store needs (similar texts are near, unrelated ones
  are not), fast enough to embed a million memories, and has no model to download. Corpus
  vectors are computed in one numpy pass before ingest and looked up by text during it, so
  the ingest figure measures the store, not the embedder (whose own rate is reported).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

STEMS = 30_000
ZIPF = 1.05
SUFFIXES = ("", "s", "ed", "ing")
#: Function words a note is written with (a subset of any English stop-word list).
FUNCTION_WORDS = ["the", "a", "an", "to", "of", "and", "in", "on", "for", "with", "we", "it", "is", "was", "that", "this", "at", "by", "from", "as", "be", "are", "our", "not", "but", "or", "so", "if", "then", "when", "before", "after", "about", "into", "over", "they", "them", "their", "there", "here", "has", "had", "have", "will", "would", "can", "could", "should", "may", "just", "also", "still", "only", "very", "more", "most"]
QUESTION_FRAMES = (
    "what did we decide about {w}",
    "remind me what we said about {w}",
    "do you remember the notes on {w}",
    "what was the plan for {w}",
    "tell me again how we handled {w}",
    "what is the status of {w}",
    "where did we land on {w}",
    "can you find what we wrote about {w}",
)
JOINERS = ("and", "for the", "with the", "in the", "and the", "of the", "on")
OFF_CORPUS_WORDS = ["weather", "lisbon", "tomorrow", "umbrella", "forecast", "rain", "sunny", "recipe", "pancakes", "syrup", "breakfast", "football", "score", "tonight", "league", "goal", "penguin", "antarctica", "migration", "ice", "glacier", "violin", "concerto", "orchestra", "tickets", "saturday", "poem", "ocean", "lighthouse", "sailor", "harbour", "volcano"]
DIMS = 384
_TOKEN = re.compile(r"[a-z0-9]+")
HASH_BUCKETS = 1 << 16


def _stems(rng: np.random.Generator) -> list[str]:
    consonants = list("bcdfghjklmnprstvz")
    vowels = list("aeiou")
    seen: set[str] = set(FUNCTION_WORDS) | set(OFF_CORPUS_WORDS)
    out: list[str] = []
    while len(out) < STEMS:
        syllables = int(rng.integers(2, 4))
        word = "".join(str(rng.choice(consonants)) + str(rng.choice(vowels)) for _ in range(syllables))
        word += str(rng.choice(consonants))
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


def _weights() -> np.ndarray:
    ranks = np.arange(1, STEMS + 1)
    weights = 1.0 / ranks**ZIPF
    return weights / weights.sum()


class Corpus:
    """``texts`` and, per text, the stems it was written from (for the queries)."""

    def __init__(self, n: int, seed: int = 11) -> None:
        rng = np.random.default_rng(seed)
        self.stems = _stems(np.random.default_rng(7))
        weights = _weights()
        lengths = rng.integers(58, 72, n)  # about 400 characters
        total = int(lengths.sum())
        is_function = rng.random(total) < 0.4
        content = rng.choice(STEMS, size=total, p=weights)
        inflection = rng.integers(0, len(SUFFIXES), total)
        function = rng.integers(0, len(FUNCTION_WORDS), total)
        stems, suffixes = self.stems, SUFFIXES
        self.texts: list[str] = []
        self.content: list[np.ndarray] = []
        at = 0
        for length in lengths.tolist():
            words = []
            own = []
            for j in range(at, at + length):
                if is_function[j]:
                    words.append(FUNCTION_WORDS[function[j]])
                else:
                    words.append(stems[content[j]] + suffixes[inflection[j]])
                    own.append(content[j])
            words[0] = words[0].capitalize()
            self.texts.append(" ".join(words) + ".")
            self.content.append(np.array(own))
            at += length


def queries(corpus: Corpus, targets: Sequence[int], seed: int = 12) -> list[str]:
    """One question per target index (see the module docstring)."""
    rng = np.random.default_rng(seed)
    out = []
    for target in targets:
        # A question names what the memory is about: mostly its distinctive words (the rarest
        # of its stems across the corpus), sometimes a common one too.
        own = np.unique(corpus.content[target])
        distinctive = np.sort(own)[::-1][:8]
        picks = rng.choice(distinctive, size=min(len(distinctive), int(rng.integers(2, 5))), replace=False)
        picks = np.append(picks, rng.choice(own)) if rng.random() < 0.5 else picks
        words = [corpus.stems[p] + SUFFIXES[int(rng.integers(0, len(SUFFIXES)))] for p in picks.tolist()]
        noise = corpus.stems[int(rng.integers(0, STEMS))]
        words.insert(int(rng.integers(1, len(words) + 1)), noise)
        phrase = words[0]
        for word in words[1:]:
            phrase += f" {JOINERS[int(rng.integers(0, len(JOINERS)))]} {word}"
        frame = QUESTION_FRAMES[int(rng.integers(0, len(QUESTION_FRAMES)))]
        text = frame.format(w=phrase)
        while len(text.split()) < 8:
            text += " " + str(rng.choice(["please", "again", "for me", "today"]))
        out.append(" ".join(text.split()[:15]) + "?")
    return out


def off_corpus_queries(count: int, seed: int = 13) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        words = rng.choice(OFF_CORPUS_WORDS, size=3, replace=False).tolist()
        frame = QUESTION_FRAMES[int(rng.integers(0, len(QUESTION_FRAMES)))]
        out.append(frame.format(w=f"{words[0]} and the {words[1]} for {words[2]}") + " tomorrow?")
    return out


def always_on_facts(count: int = 20) -> list[str]:
    return [
        f"Standing instruction {i}: operator rule number {i} says keep replies short, cite the "
        f"ticket, and never deploy on day {i % 7} without a second review by the on-call lead."
        for i in range(count)
    ]


def _crude_stem(word: str) -> str:
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)]
    return word


_FUNCTION = frozenset(FUNCTION_WORDS) | frozenset(
    ["what", "did", "decide", "remind", "me", "said", "do", "you", "remember", "notes", "was", "plan", "how", "handled", "status", "where", "land", "can", "find", "wrote", "tell", "again", "please", "today", "i"]
)


class HashingEmbedder:
    """Feature hashing: stem -> one of 65,536 fixed random unit directions; text = normalised sum."""

    name = "bench-hashing-384"
    dimensions = DIMS

    def __init__(self, seed: int = 21) -> None:
        table = np.random.default_rng(seed).normal(size=(HASH_BUCKETS, DIMS)).astype(np.float32)
        self._table = table / np.linalg.norm(table, axis=1, keepdims=True)
        self._known: dict[str, int] = {}
        self._matrix = np.zeros((0, DIMS), dtype=np.float32)
        self._idf = np.ones(HASH_BUCKETS, dtype=np.float32)
        self._bucket_of: dict[str, int] = {}

    def fit_matrix(self, texts: Sequence[str]) -> np.ndarray:
        """Fit the IDF on ``texts`` (a TF-IDF vectoriser's fit) and return their vectors."""
        buckets = [np.array(self._buckets(t) or [0], dtype=np.int64) for t in texts]
        df = np.zeros(HASH_BUCKETS, dtype=np.int64)
        for b in buckets:
            df[np.unique(b)] += 1
        self._idf = np.log((len(texts) + 1) / (df + 1)).astype(np.float32) + 1.0
        return self._vectors(buckets)

    def _buckets(self, text: str) -> list[int]:
        cache = self._bucket_of
        out = []
        for word in _TOKEN.findall(text.lower()):
            bucket = cache.get(word)
            if bucket is None:
                bucket = cache[word] = (
                    -1 if word in _FUNCTION else zlib.crc32(_crude_stem(word).encode()) % HASH_BUCKETS
                )
            if bucket >= 0:
                out.append(bucket)
        return out

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors([np.array(self._buckets(t) or [0], dtype=np.int64) for t in texts])

    def _vectors(self, buckets: Sequence[np.ndarray]) -> np.ndarray:
        """Vectors in one numpy pass per 4,096 texts."""
        out = np.zeros((len(buckets), DIMS), dtype=np.float32)
        for start in range(0, len(buckets), 4096):
            block = buckets[start : start + 4096]
            lengths = np.array([len(b) for b in block])
            flat = np.concatenate(block)
            offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            sums = np.add.reduceat(self._table[flat] * self._idf[flat, None], offsets, axis=0)
            out[start : start + len(block)] = sums / np.maximum(
                np.linalg.norm(sums, axis=1, keepdims=True), 1e-9
            )
        return out

    def preload(self, texts: Sequence[str], matrix: np.ndarray) -> None:
        base = len(self._matrix)
        self._matrix = np.vstack([self._matrix, matrix]) if base else matrix
        for i, text in enumerate(texts):
            self._known[text] = base + i

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A texts x dimensions array (the store packs it in one call)."""
        known = [self._known.get(t) for t in texts]
        if all(i is not None for i in known):
            return self._matrix[np.array(known, dtype=np.int64)]
        return self.matrix(texts)
