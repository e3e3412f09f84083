"""Consolidation on write (ADR D7): duplicates, same-subject supersession, near-duplicates.

Why structural keys and never an LLM judge: a write must be decided the same way every time,
inside the write's own transaction, at the cost of an index lookup. Three rules, in order,
each against *deliverable* rows of the *same scope* only:

1. **Exact duplicate** (``store.deduplicate``, default on). The same content (after
   collapsing runs of whitespace, see ``normalise_content``) from the same provenance is not
   stored twice: the write returns the existing row's id and says so (outcome
   ``duplicate``). Provenance is part of the key so an agent's copy of an operator fact never
   borrows the operator's trust, and vice versa.
   **The text of a superseded row** (same key) is not stored either, while the row that
   superseded it (followed to the end of the chain) is deliverable: storing it would give the
   projection two heads that contradict each other ("the window is Tuesday" beside "the window
   is Wednesday", which replaced it). The write returns that current head's id with outcome
   ``outdated`` and ``duplicate_of`` naming the superseded row, and its message says how to
   restate the old text on purpose: supersede the head with it. When the chain ends in a row
   that is no longer deliverable (rejected, expired, purged), nothing contradicts the write,
   and it is stored.
2. **Same subject.** A write naming a ``subject`` already held by a deliverable row of the same
   scope and kind supersedes that row: insert the new row, then invalidate the old one with
   ``superseded_by:<new id>``, in one transaction (outcome ``superseded``). Turned off by
   ``store.auto_supersede = false`` (the write is then stored beside the old row).
3. **Near duplicate.** Otherwise the row is stored, and deliverable rows whose text is similar
   (``similarity`` >= ``store.near_duplicate_threshold``, default 0.8) are recorded as candidates
   for review in the new row's history and reported (outcome ``near_duplicate``); nothing is
   merged. The measure is the Jaccard index of the two texts' word sets, after Unicode NFKC
   normalisation and case folding, with every run of non-word characters a separator.
   Candidates come from the full-text index, by a prefix filter: a row at or above threshold
   ``t`` shares all but at most ``(1 - t)`` of the write's words, so it holds at least one of
   any ``floor((1 - t) * n) + 1`` of them; the longest are taken (long words tend to be rare
   ones, so the lookup stays small). The newest ``NEAR_DUPLICATE_CANDIDATES`` rows that hold
   one are compared, so where those words are common an older near duplicate can go
   unreported: near duplicates are a review aid, not a guarantee.

Every outcome is returned to the caller (``WriteOutcome``) and recorded in the history.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Literal

import attrs

from contextplane.errors import ValidationError

Outcome = Literal["stored", "duplicate", "outdated", "superseded", "near_duplicate"]

DEFAULT_NEAR_DUPLICATE_THRESHOLD: Final[float] = 0.8
#: How many candidate rows a single write compares itself with (the newest that hold one of
#: its prefix-filter words, in its scope).
NEAR_DUPLICATE_CANDIDATES: Final[int] = 50

_WORDS: Final[re.Pattern[str]] = re.compile(r"[^\W_]+")
#: How many supersession links ``current_head`` follows (a chain is linear and acyclic; the
#: bound only keeps a damaged store from looping).
MAX_CHAIN: Final[int] = 10_000


def current_head(successor_id: str, step: Callable[[str], tuple[str | None, bool] | None]) -> str | None:
    """The row that stands now for a superseded one: from ``successor_id`` (its
    ``superseded_by``), follow the links (``step(id)``: the id that row was superseded by, or
    None, and whether it is deliverable now; None for a row that is gone) to the end of the
    chain. None when that last row is not deliverable: then no head contradicts a write of the
    superseded text."""
    current = successor_id
    for _ in range(MAX_CHAIN):
        found = step(current)
        if found is None:
            return None
        following, deliverable = found
        if following is None:
            return current if deliverable else None
        current = following
    return None


def outdated_message(old_id: str) -> str:
    """What the current head's history says of a write of a superseded row's text."""
    return f"a write of the text of superseded memory {old_id} returned this row, the current one"


def normalise_content(text: str) -> str:
    """The text an exact duplicate is compared by: runs of whitespace become one space,
    leading and trailing whitespace go. Case and punctuation are kept: "Deploy on Friday" and
    "deploy on friday!" are near duplicates for review, not the same memory."""
    # Most text already is, and saying so is cheaper than splitting it: every whitespace
    # character but the space is a Unicode separator or control, so not printable.
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def content_hash(text: Any) -> int | None:
    """A 64-bit key of ``normalise_content(text)`` (signed, to fit SQLite's INTEGER); the store
    indexes it so a duplicate is one lookup. Equal keys are compared by text before use."""
    if not isinstance(text, str):
        return None
    digest = hashlib.blake2b(normalise_content(text).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def word_set(text: str) -> frozenset[str]:
    """The words the similarity measure compares: NFKC, case-folded, split on non-word runs."""
    return frozenset(_WORDS.findall(unicodedata.normalize("NFKC", text).casefold()))


def candidate_terms(text: str, threshold: float) -> list[str]:
    """The words a near duplicate of ``text`` (similarity >= ``threshold``) must hold at least
    one of: ``floor((1 - threshold) * n) + 1`` of its ``n`` distinct words, the longest first."""
    words = sorted(word_set(text), key=lambda w: (-len(w), w))
    need = int((1 - threshold) * len(words) + 1e-9) + 1
    return words[:need]


def similarity(a: str, b: str) -> float:
    """Jaccard index of the two word sets (1.0 for the same words, 0.0 for none shared)."""
    wa, wb = word_set(a), word_set(b)
    if not wa and not wb:
        return 1.0
    return len(wa & wb) / len(wa | wb)


def _threshold(_inst: object, _attr: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ValidationError(f"near_duplicate_threshold: expected a number in (0, 1], got {value!r}")


@attrs.frozen
class Consolidation:
    """How a store consolidates writes: from ``[store] deduplicate``, ``auto_supersede`` and
    ``near_duplicate_threshold`` (``from_config``)."""

    deduplicate: bool = True
    auto_supersede: bool = True
    near_duplicate_threshold: float = attrs.field(
        default=DEFAULT_NEAR_DUPLICATE_THRESHOLD, validator=_threshold
    )

    @classmethod
    def from_config(cls, config: Any) -> Consolidation:
        store = config.store
        return cls(
            deduplicate=bool(store.deduplicate),
            auto_supersede=bool(store.auto_supersede),
            near_duplicate_threshold=float(store.near_duplicate_threshold),
        )


def near_duplicates(
    content: str, candidates: Iterable[tuple[str, str]], threshold: float, *, exclude: Sequence[str] = ()
) -> tuple[tuple[str, float], ...]:
    """``(id, similarity)`` of the candidates at or above ``threshold``, most similar first."""
    words = word_set(content)
    found = []
    for chunk_id, text in candidates:
        if chunk_id in exclude:
            continue
        other = word_set(text)
        union = words | other
        score = len(words & other) / len(union) if union else 1.0
        if score >= threshold:
            found.append((chunk_id, round(score, 4)))
    found.sort(key=lambda pair: (-pair[1], int(pair[0]) if pair[0].isdigit() else 0, pair[0]))
    return tuple(found)


class WriteOutcome(str):
    """The id a write resolved to, with what consolidation did.

    A ``str`` (the id), so every caller that expects ``add_chunk`` to return an id keeps
    working; ``outcome`` says whether the row was ``stored``, found to be a ``duplicate`` of
    ``duplicate_of`` (the id returned), stored and ``superseded`` the rows in ``superseded``,
    or stored beside its ``near_duplicates`` (``(id, similarity)`` pairs, for review)."""

    # Class-level defaults: a plain ``stored`` outcome (nearly every row of a bulk write) then
    # needs no instance dictionary at all.
    outcome: Outcome = "stored"
    duplicate_of: str | None = None
    superseded: tuple[str, ...] = ()
    near_duplicates: tuple[tuple[str, float], ...] = ()

    def __new__(
        cls,
        chunk_id: str,
        outcome: Outcome = "stored",
        *,
        duplicate_of: str | None = None,
        superseded: Sequence[str] = (),
        near_duplicates: Sequence[tuple[str, float]] = (),
    ) -> WriteOutcome:
        self = super().__new__(cls, chunk_id)
        if outcome != "stored":
            self.outcome = outcome
        if duplicate_of is not None:
            self.duplicate_of = duplicate_of
        if superseded:
            self.superseded = tuple(superseded)
        if near_duplicates:
            self.near_duplicates = tuple(near_duplicates)
        return self

    @property
    def id(self) -> str:
        return str(self)

    @property
    def stored(self) -> bool:
        """True when the write added a row (every outcome but ``duplicate`` and ``outdated``)."""
        return self.outcome not in ("duplicate", "outdated")

    @property
    def message(self) -> str:
        """The outcome as one sentence, for the CLI and for tools."""
        if self.outcome == "duplicate":
            return f"not stored: an exact duplicate of memory {self.duplicate_of}, which is returned"
        if self.outcome == "outdated":
            return (
                f"not stored: the text of memory {self.duplicate_of}, which memory {self.id} superseded; "
                f"{self.id}, the current one, is returned (to make this text current again, "
                f"supersede {self.id} with it)"
            )
        if self.outcome == "superseded":
            olds = ", ".join(self.superseded)
            return f"stored as {self.id}; it supersedes memory {olds} (same subject, scope and kind)"
        if self.outcome == "near_duplicate":
            near = ", ".join(f"{i} ({s:.2f})" for i, s in self.near_duplicates)
            return f"stored as {self.id}; similar to {near}: recorded for review, nothing merged"
        return f"stored as {self.id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome,
            "duplicate_of": self.duplicate_of,
            "superseded": list(self.superseded),
            "near_duplicates": [{"id": i, "similarity": s} for i, s in self.near_duplicates],
            "message": self.message,
        }

    def detail(self) -> dict[str, Any]:
        """What the history keeps of the outcome (on the row's ``created`` event)."""
        out: dict[str, Any] = {"outcome": self.outcome, "message": self.message}
        if self.superseded:
            out["superseded"] = list(self.superseded)
        if self.near_duplicates:
            out["near_duplicates"] = [[i, s] for i, s in self.near_duplicates]
        return out

    def __reduce__(self) -> Any:
        return (
            _rebuild,
            (str(self), self.outcome, self.duplicate_of, self.superseded, self.near_duplicates),
        )


def _rebuild(
    chunk_id: str,
    outcome: Outcome,
    duplicate_of: str | None,
    superseded: tuple[str, ...],
    near: tuple[tuple[str, float], ...],
) -> WriteOutcome:
    return WriteOutcome(
        chunk_id, outcome, duplicate_of=duplicate_of, superseded=superseded, near_duplicates=near
    )
