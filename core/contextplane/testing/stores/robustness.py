"""What no caller can break: hostile search text, concurrent writers, every attribute round-trip;
the consistent view a composition reads through (ADR D2: one projection, one state); and the
async forms composition and the memory tools await.

Why together: each drives the store the way a busy runtime does (many callers, threads, an event
loop) rather than one write and one read.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

from contextplane.store import aio
from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import (
    HOSTILE_QUERIES,
    RELEVANCE_FILLER,
    _get,
    _ids,
    _shape,
    _StoreBase,
)


class StoreRobustnessChecks(_StoreBase):
    """What no caller can break: hostile search text, concurrent writers, every attribute."""

    @checks("STORE-SEARCH-HOSTILE")
    def test_store_search_hostile(self, store: KnowledgeStore, requirement: Requirement) -> None:
        store.add_chunk("kiwi alpha", "general", "operator")
        store.add_chunk('quote " paren ( star * caret ^', "general", "operator", namespace="project:a")
        for query in HOSTILE_QUERIES:
            for kw in ({}, {"namespaces": ["", "project:a"]}, {"include_superseded": True}):
                try:
                    hits = store.search(query, 5, **kw)
                except Exception as exc:
                    requirement.fail(f"search({query[:60]!r}, {kw}) raised {type(exc).__name__}: {exc}")
                requirement.check(
                    isinstance(hits, list),
                    f"search({query[:60]!r}) returned {type(hits).__name__}, not a list",
                )

    @checks("STORE-SEARCH-RELEVANCE")
    def test_store_search_relevance(self, store: KnowledgeStore, requirement: Requirement) -> None:
        whole = store.add_chunk("kiwi crates leave the orchard at dawn", "general", "operator")
        function_only = store.add_chunk("the meeting is when it is", "general", "operator")
        for i, words in enumerate(RELEVANCE_FILLER):
            store.add_chunk(f"{words} number{i}", "general", "operator")
        query = "when do the kiwi crates leave the orchard?"
        hits = store.search(query, 20)
        for hit in hits:
            relevance = hit.relevance
            requirement.check(
                isinstance(relevance, float) and 0.0 <= relevance <= 1.0,
                f"search({query!r}) gave row {hit.chunk.id} relevance {relevance!r}; "
                "expected a float in [0, 1]",
            )
        requirement.check(
            bool(hits) and hits[0].chunk.id == whole,
            f"search({query!r}) ranked {[h.chunk.id for h in hits]}; expected {whole} (every meaningful "
            "word) first",
        )
        top = hits[0].relevance or 0.0
        requirement.check(top >= 0.3, f"the row holding every meaningful word has relevance {top}, under 0.3")
        for hit in hits:
            if hit.chunk.id == function_only:
                requirement.check(
                    (hit.relevance or 0.0) < 0.3 and (hit.relevance or 0.0) < top,
                    f"row {function_only} shares only function words with {query!r} but has relevance "
                    f"{hit.relevance} (the full match: {top})",
                )

    @checks("STORE-SEARCH-DEPTH")
    def test_store_search_depth(self, store: KnowledgeStore, requirement: Requirement) -> None:
        relevant = set(
            store.add_chunks(
                {"content": f"the kiwi crates left orchard {i} at dawn", "source_type": "operator"}
                for i in range(40)
            )
        )
        store.add_chunks(
            {"content": f"{words} number{i}", "source_type": "operator"}
            for i, words in enumerate(RELEVANCE_FILLER * 5)
        )
        query = "when did the kiwi crates leave the orchard?"
        previous = -1
        for k in (5, 10, 20, 40, 80):
            found = sum(hit.chunk.id in relevant for hit in store.search(query, k))
            requirement.check(
                found >= previous,
                f"search({query!r}, {k}) returned {found} of the 40 relevant rows, fewer than the "
                f"{previous} the shallower search returned",
            )
            previous = found
        requirement.check(
            previous == 40,
            f"search({query!r}, 80) returned {previous} of the 40 rows holding the question's words",
        )

    @checks("STORE-CONCURRENT-WRITES")
    def test_store_concurrent_writes(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        threads, per_thread = 8, 25
        results: list[list[str]] = [[] for _ in range(threads)]
        errors: list[BaseException] = []
        start = threading.Barrier(threads)

        def write(n: int) -> None:
            try:
                start.wait()
                for i in range(per_thread):
                    if i % 5 == 4:
                        results[n].extend(
                            store.add_chunks([{"content": f"kiwi bulk t{n} i{i} {j}"} for j in range(2)])
                        )
                    else:
                        results[n].append(store.add_chunk(f"kiwi t{n} i{i}", "general", "operator"))
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        requirement.check(not errors, f"concurrent writers raised: {errors[:3]}")
        ids = [i for r in results for i in r]
        per = per_thread + per_thread // 5
        requirement.check(len(ids) == threads * per, f"{len(ids)} ids came back for {threads * per} writes")
        requirement.check(len(set(ids)) == len(ids), f"{len(ids) - len(set(ids))} ids were handed out twice")
        stored = _ids(store.list_chunks())
        lost = set(ids) - stored
        requirement.check(
            not lost, f"{len(lost)} written rows are missing afterwards, e.g. {sorted(lost)[:5]}"
        )

    @checks("STORE-ROUND-TRIP")
    def test_store_round_trip(self, store: KnowledgeStore, requirement: Requirement) -> None:
        content = "Ünïcödé 🥝 multi\nline\ttext with 'quotes', \"doubles\", NUL\x00 and \u2028 separators"
        expires = datetime(2030, 5, 17, 8, 30, 15, tzinfo=UTC)
        written: dict[str, Any] = {
            "domain": "decisions/2026",
            "source_type": "harvest",
            "memory_kind": "decision",
            "delivery_policy": "on_demand",
            "review_state": "confirmed",
            "namespace": "project:round-trip",
            "heading": "Heading — with dash",
            "source": "https://example.invalid/doc?id=1&x=2",
            "subject": "subject ∑",
            "epoch": "era-7",
            "expires_at": expires,
        }
        cid = store.add_chunk(content, **written)
        chunk = _get(store, cid, requirement)
        requirement.check(chunk.content == content, f"content read back as {chunk.content!r}")
        for name, value in written.items():
            got = getattr(chunk, name)
            requirement.check(got == value, f"{name} was written as {value!r} and read back as {got!r}")
        bulk = store.add_chunks([{"content": content, **written}])
        requirement.check(len(bulk) == 1, f"add_chunks of one row returned {len(bulk)} ids")
        again = _get(store, bulk[0], requirement)
        for name, value in written.items():
            got = getattr(again, name)
            requirement.check(
                got == value, f"add_chunks: {name} was written as {value!r} and read back as {got!r}"
            )

    @checks("STORE-GET-UNKNOWN")
    def test_store_get_unknown(self, store: KnowledgeStore, requirement: Requirement) -> None:
        store.add_chunk("kiwi", "general", "operator")
        for bogus in ("999999999", "not-an-id", "", " 1 x", "-1", "1; DROP TABLE chunks"):
            try:
                got = store.get(bogus)
            except Exception as exc:
                requirement.fail(f"get({bogus!r}) raised {type(exc).__name__}: {exc}")
            requirement.check(got is None, f"get({bogus!r}) returned {got!r}")


class StoreConsistencyChecks(_StoreBase):
    """ADR D2's one projection, one state: the view a composition reads through."""

    @checks("STORE-CONSISTENT-READ")
    def test_store_consistent_read(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        opener = getattr(store, "consistent_read", None)
        requirement.check(callable(opener), f"{type(store).__name__} has no consistent_read()")
        old = store.add_chunk("kiwi standing fact", "fact", "operator")
        doubt = store.add_chunk("kiwi doubtful note", "general", "extracted")
        with store.consistent_read() as view:  # type: ignore[attr-defined]
            before_list = _ids(view.list_chunks(deliverable=True))
            before_hits = {h.chunk.id for h in view.search("kiwi", 50)}
            new = store.supersede(old, "kiwi replacement fact")
            store.set_review_state(doubt, "rejected")
            added = store.add_chunk("kiwi added later", "fact", "operator")
            listed = _ids(view.list_chunks(deliverable=True))
            hits = {h.chunk.id for h in view.search("kiwi", 50)}
            seen_old = view.get(old)
            seen_new = view.get(new)
        requirement.check(
            before_list == {old, doubt} and before_hits == {old, doubt},
            f"the view opened on rows {sorted({old, doubt})} but listed {sorted(before_list)} and "
            f"found {sorted(before_hits)}",
        )
        requirement.check(
            listed == {old, doubt},
            f"after a supersession, a rejection and an add committed while the view was open, "
            f"view.list_chunks(deliverable=True) returned {sorted(listed)}, not {sorted({old, doubt})}",
        )
        requirement.check(
            hits == {old, doubt}, f"view.search saw writes made after it opened: {sorted(hits)}"
        )
        requirement.check(
            seen_old is not None and seen_old.invalidated_at is None,
            f"view.get({old!r}) saw the supersession committed after the view opened: {seen_old!r}",
        )
        requirement.check(seen_new is None, f"view.get({new!r}) returned a row written after it opened")
        now = _ids(store.list_chunks(deliverable=True))
        requirement.check(
            now == {new, added},
            f"after the view closed the store lists {sorted(now)}; the writes made meanwhile "
            f"({sorted({new, added})} deliverable) must all be visible",
        )


class StoreAsyncChecks(_StoreBase):
    """The async forms composition and the memory tools await (``contextplane.store.aio``)."""

    @checks("STORE-ASYNC-PARITY")
    def test_store_async_parity(self, store: KnowledgeStore, requirement: Requirement) -> None:
        asyncio.run(self._async_parity(store, requirement))

    async def _async_parity(self, store: KnowledgeStore, req: Requirement) -> None:
        # Each write is made twice, once through each form, on twin rows; the twins must end up
        # alike. What the lifecycle itself must do is the other checks' business. The twins'
        # texts differ, so consolidation on write (an exact duplicate returns the existing row)
        # keeps them two rows.
        scope = "project:a"
        ids = {
            "sync": store.add_chunk("kiwi orchard east", "general", "operator", namespace=scope),
            "async": await aio.aadd_chunk(store, "kiwi orchard west", "general", "operator", namespace=scope),
        }
        await aio.aadd_chunk(store, "banana stand", "hot", "operator")
        store.add_chunk("kiwi pending note", "general", "extracted")
        sync_row, async_row = _get(store, ids["sync"], req), _get(store, ids["async"], req)
        req.check(
            _shape(async_row) == _shape(sync_row),
            f"aadd_chunk wrote {_shape(async_row)}, add_chunk wrote {_shape(sync_row)}",
        )
        await self._reads_agree(store, req, "after the writes")
        sync_review = store.set_review_state(ids["sync"], "rejected")
        async_review = await aio.aset_review_state(store, ids["async"], "rejected")
        req.check(
            _shape(async_review) == _shape(sync_review),
            f"aset_review_state returned {_shape(async_review)}, set_review_state {_shape(sync_review)}",
        )
        twins = [
            store.add_chunk(f"plum tree pruning {side}", "general", "operator") for side in ("north", "south")
        ]
        successors = (
            store.supersede(twins[0], "plum tree pruning north in March"),
            await aio.asupersede(store, twins[1], "plum tree pruning south in March"),
        )
        for what, pair in (("the old row", twins), ("the successor", successors)):
            a, b = store.get(pair[0]), store.get(pair[1])
            req.check(
                (a is None) == (b is None) and (a is None or b is None or _shape(a) == _shape(b)),
                f"after supersede / asupersede {what} is {a and _shape(a)} / {b and _shape(b)}",
            )
        await self._reads_agree(store, req, "after review and supersession")

    @staticmethod
    async def _reads_agree(store: KnowledgeStore, req: Requirement, when: str) -> None:
        for query, options in (
            ("kiwi", {}),
            ("kiwi", {"namespaces": ["project:a"]}),
            ("kiwi", {"namespaces": []}),
            ("plum", {"include_superseded": True}),
            ("banana", {"deliverable": False}),
            ("", {}),
        ):
            sync = [(h.chunk.id, h.rank) for h in store.search(query, 5, **options)]
            other = [(h.chunk.id, h.rank) for h in await aio.asearch(store, query, 5, **options)]
            req.check(other == sync, f"{when}: asearch({query!r}, {options}) returned {other}, search {sync}")
        for filters in ({}, {"deliverable": True}, {"delivery_policy": "always"}, {"namespace": "project:a"}):
            listed = [c.id for c in store.list_chunks(**filters)]
            alisted = [c.id for c in await aio.alist_chunks(store, **filters)]
            req.check(
                alisted == listed, f"{when}: alist_chunks({filters}) returned {alisted}, list_chunks {listed}"
            )
