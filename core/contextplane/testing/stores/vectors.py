"""The recorded vector space (capability "vector_space"): which embedder made a store's vectors,
the refusal to mix spaces, and the way to change it.

Why its own module: it needs the author's ``reopen`` fixture and a deterministic embedder
(``KitEmbedder``), which no other group uses.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from contextplane.embedding import Embedder
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import RELEVANCE_FILLER, _StoreBase


class KitEmbedder:
    """A deterministic embedder for the vector-space checks: hashed words, so a row's own text
    is its nearest neighbour; ``name`` and ``dimensions`` as given."""

    def __init__(self, name: str, dimensions: int) -> None:
        self.name = name
        self.dimensions = dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                slot = int.from_bytes(digest[:4], "little") % self.dimensions
                vector[slot] += 1.0 if digest[4] & 1 else -1.0
            out.append(vector)
        return out


class StoreVectorSpaceChecks(_StoreBase):
    """The recorded vector space: which embedder made a store's vectors, and the way to change it."""

    def _reopen(self, request: pytest.FixtureRequest) -> Callable[[Embedder | None], Any]:
        reopen: Callable[[Embedder | None], Any] = request.getfixturevalue("reopen")
        return reopen

    @checks("STORE-VECTOR-SPACE-RECORDED")
    def test_store_vector_space_recorded(
        self, request: pytest.FixtureRequest, requirement: Requirement
    ) -> None:
        self._require(requirement)
        reopen = self._reopen(request)
        plain = reopen(None)
        plain.add_chunk("written before any embedder", source_type="operator")
        store = reopen(KitEmbedder("kit:model-a", 12))
        store.add_chunk(RELEVANCE_FILLER[0], source_type="operator")
        store.add_chunk(RELEVANCE_FILLER[1], source_type="operator")
        requirement.check(
            tuple(store.vector_space()) == ("kit:model-a", 12),
            f"vector_space() is {store.vector_space()!r}, not ('kit:model-a', 12)",
        )
        requirement.check(
            store.vectorless_count() == 1,
            f"vectorless_count() is {store.vectorless_count()}: one row was written without an embedder",
        )

    @checks("STORE-VECTOR-SPACE-MISMATCH")
    def test_store_vector_space_mismatch(
        self, request: pytest.FixtureRequest, requirement: Requirement
    ) -> None:
        from contextplane.errors import VectorSpaceError

        self._require(requirement)
        reopen = self._reopen(request)
        reopen(KitEmbedder("kit:model-a", 12)).add_chunk(RELEVANCE_FILLER[0], source_type="operator")
        for other in (KitEmbedder("kit:model-b", 12), KitEmbedder("kit:model-a", 16)):
            try:
                reopen(other)
            except VectorSpaceError as exc:
                text = str(exc)
                requirement.check(
                    "kit:model-a" in text and other.name in text and str(other.dimensions) in text,
                    f"the error does not name both embedders: {text}",
                )
                requirement.check(
                    "contextplane memory reindex --rebuild" in text,
                    f"the error does not name the fix: {text}",
                )
            else:
                requirement.check(False, f"opening with {other.name!r} ({other.dimensions}) was not refused")
        space = tuple(reopen(None).vector_space())
        requirement.check(space == ("kit:model-a", 12), f"a refused open changed the space to {space!r}")

    @checks("STORE-VECTOR-REBUILD")
    def test_store_vector_rebuild(self, request: pytest.FixtureRequest, requirement: Requirement) -> None:
        from contextplane.errors import VectorSpaceError

        self._require(requirement)
        reopen = self._reopen(request)
        first = reopen(KitEmbedder("kit:model-a", 12))
        ids = [first.add_chunk(fact, source_type="operator") for fact in RELEVANCE_FILLER[:4]]
        new = KitEmbedder("kit:model-b", 20)
        done = reopen(None).rebuild_vectors(new)
        requirement.check(done == len(ids), f"rebuild_vectors embedded {done} rows, not {len(ids)}")
        store = reopen(new)
        requirement.check(
            tuple(store.vector_space()) == ("kit:model-b", 20) and store.vectorless_count() == 0,
            f"after the rebuild: space {store.vector_space()!r}, "
            f"{store.vectorless_count()} rows without a vector",
        )
        nearest = store.vector_neighbours(RELEVANCE_FILLER[2], 1)
        requirement.check(
            [str(i) for i in nearest] == [str(ids[2])],
            f"the vector leg found {nearest} for its own row {ids[2]}",
        )
        try:
            reopen(KitEmbedder("kit:model-a", 12))
        except VectorSpaceError:
            pass
        else:
            requirement.check(False, "after the rebuild the old embedder still opens the store")
