"""The embedded store's async methods: the same answers as the sync ones, off the event loop.

(What every store's async forms must give is STORE-ASYNC-PARITY, which the store kit runs on
this store in tests/conformance/test_store_kit.py; these are the embedded store's own promises:
where the work runs, which connection it reads, and the view.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contextplane.embedding import AsyncEmbedder, Embedder, aembed
from contextplane.errors import StoreError, ValidationError
from contextplane.store import SQLiteKnowledgeStore, aio
from contextplane.store.protocol import AsyncKnowledgeStore
from tests.store.helpers import HashEmbedder


def seed(store: SQLiteKnowledgeStore) -> None:
    store.add_chunk("Deploy window: Tuesday 14:00 UTC.", "hot", "operator")
    store.add_chunk("Canary runs 30 minutes before a deploy.", "general", "operator", namespace="project:web")
    store.add_chunk("Lunch is at noon.", "general", "extracted")


class NativeAsyncEmbedder(HashEmbedder):
    """``aembed`` answers; ``embed`` refuses, so a search that embedded synchronously shows."""

    def __init__(self) -> None:
        super().__init__()
        self.async_calls = 0
        self.sync_allowed = True

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not self.sync_allowed:
            raise AssertionError("embedded with the blocking embed")
        return super().embed(texts)

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        self.async_calls += 1
        return HashEmbedder.embed(self, texts)


class ThreadedEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.get_ident())
        return super().embed(texts)


@pytest.mark.parametrize("hybrid", [False, True])
def test_async_reads_answer_what_the_sync_reads_answer(db_path: Path, hybrid: bool) -> None:
    with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder() if hybrid else None) as store:
        seed(store)
        assert isinstance(store, AsyncKnowledgeStore)

        async def main() -> None:
            for query, options in (
                ("deploy window", {}),
                ("canary", {"namespaces": ["project:web"]}),
                ("", {}),
            ):
                sync = [(h.chunk.id, h.rank, h.score) for h in store.search(query, 5, **options)]
                other = [(h.chunk.id, h.rank, h.score) for h in await store.asearch(query, 5, **options)]
                assert other == sync
            for filters in ({}, {"deliverable": True}, {"delivery_policy": "always"}):
                assert [c.id for c in await store.alist_chunks(**filters)] == [
                    c.id for c in store.list_chunks(**filters)
                ]

        asyncio.run(main())


def test_an_embedder_with_aembed_embeds_the_query_on_the_loop_without_blocking(db_path: Path) -> None:
    embedder = NativeAsyncEmbedder()
    with SQLiteKnowledgeStore(db_path, embedder=embedder) as store:
        seed(store)
        expected = [h.chunk.id for h in store.search("deploy window", 3)]
        embedder.sync_allowed = False
        hits = asyncio.run(store.asearch("deploy window", 3))
        assert [h.chunk.id for h in hits] == expected and embedder.async_calls == 1


def test_an_embedder_without_aembed_embeds_in_the_worker_thread(db_path: Path) -> None:
    embedder = ThreadedEmbedder()
    with SQLiteKnowledgeStore(db_path, embedder=embedder) as store:
        seed(store)
        embedder.threads.clear()

        async def main() -> int:
            await store.asearch("deploy window", 3)
            return threading.get_ident()

        loop_thread = asyncio.run(main())
        assert embedder.threads and loop_thread not in embedder.threads


def test_an_aembed_that_breaks_its_promise_is_a_store_error(db_path: Path) -> None:
    class Short(NativeAsyncEmbedder):
        async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
            return [[0.5] * 3 for _ in texts]

    with SQLiteKnowledgeStore(db_path, embedder=Short()) as store:
        seed(store)
        with pytest.raises(StoreError, match="returned a 3-dimension vector, declared 64"):
            asyncio.run(store.asearch("deploy", 3))


def test_async_reads_do_not_queue_behind_the_writers_lock(db_path: Path) -> None:
    """A read outside a view takes a pooled reader connection: a writer holding the store's lock
    (a long bulk insert, say) does not hold up the turns reading meanwhile."""
    with SQLiteKnowledgeStore(db_path) as store:
        seed(store)
        held, release = threading.Event(), threading.Event()

        def writer() -> None:
            with store._lock:
                held.set()
                release.wait(10)

        thread = threading.Thread(target=writer)
        thread.start()
        held.wait(5)
        try:
            hits = asyncio.run(asyncio.wait_for(store.asearch("deploy", 3), timeout=5))
            listed = asyncio.run(asyncio.wait_for(store.alist_chunks(deliverable=True), timeout=5))
        finally:
            release.set()
            thread.join()
        assert hits and len(listed) == 3


def test_reads_through_a_view_stay_in_the_view(db_path: Path) -> None:
    with SQLiteKnowledgeStore(db_path) as store:
        seed(store)

        async def main() -> tuple[list[str], list[str], int, int]:
            with store.consistent_read() as view:
                later = await store.aadd_chunk("Deploy freeze starts Friday.", "general", "operator")
                in_view = [h.chunk.id for h in await aio.asearch(view, "deploy", 5)]
                listed = len(await aio.alist_chunks(view))
            outside = [h.chunk.id for h in await aio.asearch(store, "deploy", 5)]
            return [later], in_view, listed, len(outside)

        (later,), in_view, listed, outside = asyncio.run(main())
        assert later not in in_view and listed == 3  # the view is the state when it opened
        assert outside == 3  # the store itself sees the commit (two deploy rows + the new one)


def test_async_writes_write_and_review(db_path: Path) -> None:
    with SQLiteKnowledgeStore(db_path) as store:

        async def main() -> tuple[str, str, Any]:
            first = await store.aadd_chunk("Standup at 09:30.", "general", "extracted")
            second = await store.asupersede(first, "Standup at 10:00.")
            reviewed = await store.aset_review_state(second, "confirmed")
            return first, second, reviewed

        first, second, reviewed = asyncio.run(main())
        old = store.get(first)
        assert old is not None and old.superseded_by == second
        assert reviewed.review_state == "confirmed" and store.get(second).review_state == "confirmed"


def test_the_helpers_fall_back_to_a_worker_thread_for_a_sync_only_store() -> None:
    class SyncOnly:
        def __init__(self) -> None:
            self.threads: list[int] = []

        def search(self, query: str, k: int = 10, **options: Any) -> list[Any]:
            self.threads.append(threading.get_ident())
            return []

        def list_chunks(self, **filters: Any) -> list[Any]:
            self.threads.append(threading.get_ident())
            return []

    store = SyncOnly()

    async def main() -> int:
        assert await aio.asearch(store, "q") == [] and await aio.alist_chunks(store) == []
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert len(store.threads) == 2 and loop_thread not in store.threads


def test_aembed_uses_the_embedders_own_aembed_else_a_thread() -> None:
    plain, native = ThreadedEmbedder(), NativeAsyncEmbedder()
    native.sync_allowed = False
    assert isinstance(plain, Embedder) and not isinstance(plain, AsyncEmbedder)
    assert isinstance(native, AsyncEmbedder)

    async def main() -> int:
        assert await aembed(plain, ["a b"]) == HashEmbedder().embed(["a b"])
        assert await aembed(native, ["a b"]) == HashEmbedder().embed(["a b"])
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert plain.threads and loop_thread not in plain.threads and native.async_calls == 1


def test_a_write_with_an_async_embedder_embeds_on_the_loop_and_writes_in_a_worker(db_path: Path) -> None:
    """``aadd_chunk``: the row is embedded by ``aembed`` (never the blocking ``embed``), only the
    SQL runs in a worker thread, and the row is what ``add_chunk`` stores: its vector finds it,
    and consolidation reports a second copy as the duplicate it is."""
    embedder = NativeAsyncEmbedder()
    with SQLiteKnowledgeStore(db_path, embedder=embedder) as store:
        seed(store)
        writers: list[int] = []
        original = store._write_prepared

        def spy(*args: Any, **kwargs: Any) -> Any:
            writers.append(threading.get_ident())
            return original(*args, **kwargs)

        store._write_prepared = spy  # type: ignore[method-assign]
        embedder.sync_allowed = False

        async def main() -> tuple[str, str, int]:
            new = await store.aadd_chunk("Rollback drills happen on Thursdays.", "general", "operator")
            again = await store.aadd_chunk("Rollback drills happen on Thursdays.", "general", "operator")
            return new, again, threading.get_ident()

        new, again, loop_thread = asyncio.run(main())
        assert embedder.async_calls == 2
        assert len(writers) == 2 and loop_thread not in writers
        assert new.outcome == "stored" and again.outcome == "duplicate" and str(again) == str(new)
        embedder.sync_allowed = True
        assert store.vector_neighbours("Rollback drills happen on Thursdays.", 1) == [str(new)]
        chunk = store.get(str(new))
        assert chunk is not None and (chunk.domain, chunk.source_type) == ("general", "operator")


def test_a_supersession_with_an_async_embedder_embeds_on_the_loop(db_path: Path) -> None:
    """``asupersede``, as ``aadd_chunk``: the newer row is embedded by ``aembed`` (never the
    blocking ``embed``), the write runs in a worker thread, and the result is what ``supersede``
    leaves: the old row superseded by the new one, whose vector finds it, its scope inherited."""
    embedder = NativeAsyncEmbedder()
    with SQLiteKnowledgeStore(db_path, embedder=embedder) as store:
        seed(store)
        old = str(store.add_chunk("Standup is at 09:30.", "general", "operator", namespace="project:web"))
        writers: list[int] = []
        original = store._write_superseding

        def spy(*args: Any, **kwargs: Any) -> Any:
            writers.append(threading.get_ident())
            return original(*args, **kwargs)

        store._write_superseding = spy  # type: ignore[method-assign]
        embedder.sync_allowed = False

        async def main() -> tuple[str, int]:
            return await store.asupersede(
                old, "Standup moved to 10:00.", source_type="operator"
            ), threading.get_ident()

        new, loop_thread = asyncio.run(main())
        assert embedder.async_calls == 1
        assert len(writers) == 1 and loop_thread not in writers
        embedder.sync_allowed = True
        before = store.get(old)
        after = store.get(new)
        assert before is not None and before.superseded_by == new
        assert (
            after is not None
            and after.namespace == "project:web"
            and after.content == "Standup moved to 10:00."
        )
        assert store.vector_neighbours("Standup moved to 10:00.", 1) == [new]
        with pytest.raises(StoreError, match=f"memory {old} is already invalidated; supersede {new} instead"):
            asyncio.run(store.asupersede(old, "Standup at 11:00."))
        assert embedder.async_calls == 1  # refused before anything was embedded


def test_an_async_write_checks_its_row_before_embedding(db_path: Path) -> None:
    embedder = NativeAsyncEmbedder()
    with SQLiteKnowledgeStore(db_path, embedder=embedder) as store:
        with pytest.raises(ValidationError) as sync_error:
            store.add_chunk("", "general", "operator")
        with pytest.raises(ValidationError) as async_error:
            asyncio.run(store.aadd_chunk("", "general", "operator"))
        assert str(async_error.value) == str(sync_error.value) and str(sync_error.value).startswith("content")
        with pytest.raises(TypeError, match="colour"):
            asyncio.run(store.aadd_chunk("x", colour="red"))
        assert embedder.async_calls == 0 and store.list_chunks() == []
