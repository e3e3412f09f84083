"""The embedded store: writes, reads, lifecycle, filters, search, and opening bad files."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest

from contextplane.errors import EmbedderError, StoreError, ValidationError
from contextplane.memory.consolidation import Consolidation
from contextplane.store import (
    KnowledgeStore,
    SQLiteKnowledgeStore,
    VectorSearchUnavailableWarning,
    default_db_path,
    fusion,
    open_store,
)
from contextplane.store.migrate import SCHEMA_VERSION
from tests.store.helpers import FailingEmbedder, HashEmbedder

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_store_satisfies_protocol(store: SQLiteKnowledgeStore) -> None:
    assert isinstance(store, KnowledgeStore)


def test_connection_settings(store: SQLiteKnowledgeStore) -> None:
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


class TestWrites:
    def test_round_trip_of_every_attribute(self, store: SQLiteKnowledgeStore) -> None:
        expires = datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
        chunk_id = store.add_chunk(
            "The deploy window is Tuesday",
            domain="ops",
            source_type="extracted",
            memory_kind="decision",
            delivery_policy="on_demand",
            review_state="confirmed",
            namespace="project:alpha",
            heading="Deploys",
            source="notes/deploy.md",
            subject="deploy",
            epoch="2026-q2",
            expires_at=expires,
            occurred_at="2023-05-08T15:56:00+02:00",
        )
        chunk = store.get(chunk_id)
        assert chunk is not None
        assert attrs.asdict(chunk) | {"created_at": None, "updated_at": None} == {
            "id": chunk_id,
            "content": "The deploy window is Tuesday",
            "domain": "ops",
            "source_type": "extracted",
            "memory_kind": "decision",
            "delivery_policy": "on_demand",
            "review_state": "confirmed",
            "namespace": "project:alpha",
            "heading": "Deploys",
            "source": "notes/deploy.md",
            "subject": "deploy",
            "epoch": "2026-q2",
            "invalidated_at": None,
            "invalidation_reason": None,
            "expires_at": expires,
            "created_at": None,
            "updated_at": None,
            "occurred_at": datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        }
        assert chunk.created_at.tzinfo is not None and chunk.updated_at == chunk.created_at
        assert (chunk.trust_tier, chunk.trust_label) == (2, "agent")

    def test_old_style_call_keeps_working(self, store: SQLiteKnowledgeStore) -> None:
        chunk = store.get(store.add_chunk("always mention the budget", "hot", "operator"))
        assert chunk is not None
        assert (chunk.domain, chunk.memory_kind, chunk.delivery_policy, chunk.review_state) == (
            "hot",
            "standing",
            "always",
            "confirmed",
        )

    def test_keywords_only_after_content(self, store: SQLiteKnowledgeStore) -> None:
        chunk = store.get(store.add_chunk("plain", domain="general"))
        assert chunk is not None
        assert (chunk.memory_kind, chunk.delivery_policy, chunk.review_state, chunk.trust_tier) == (
            "reference",
            None,
            "pending",
            1,
        )

    def test_expires_in_days(self, store: SQLiteKnowledgeStore) -> None:
        chunk = store.get(store.add_chunk("soon gone", expires_in_days=2))
        assert chunk is not None and chunk.expires_at is not None
        assert timedelta(days=2) - (chunk.expires_at - chunk.created_at) < timedelta(seconds=1)

    @pytest.mark.parametrize(
        ("kwargs", "pattern"),
        [
            ({"content": b"bytes"}, r"^content: expected text \(str\), got bytes"),
            ({"content": None}, r"^content: expected text \(str\), got NoneType"),
            ({"content": "  "}, r"^content: must not be empty"),
            ({"content": "x", "memory_kind": "thought"}, r"^memory_kind: 'thought'"),
            ({"content": "x", "delivery_policy": "never"}, r"^delivery_policy: 'never'"),
            ({"content": "x", "review_state": "approved"}, r"^review_state: 'approved'"),
            ({"content": "x", "expires_at": "soonish"}, r"^expires_at: 'soonish'"),
            ({"content": "x", "expires_in_days": -3}, r"^expires_in_days: -3 is outside"),
            ({"content": "x", "namespace": "team:x"}, r"^namespace: 'team:x' is not a scope"),
            ({"content": "x", "heading": 7}, r"^heading: expected text"),
        ],
    )
    def test_malformed_values_name_the_field(
        self, store: SQLiteKnowledgeStore, kwargs: dict[str, object], pattern: str
    ) -> None:
        content = kwargs.pop("content")
        with pytest.raises(ValidationError, match=pattern):
            store.add_chunk(content, **kwargs)  # type: ignore[arg-type]
        assert store.list_chunks() == []

    def test_bulk_rows_are_all_or_nothing(self, store: SQLiteKnowledgeStore) -> None:
        with pytest.raises(ValidationError, match=r"^review_state: 'bogus'"):
            store.add_chunks([{"content": "a"}, {"content": "b", "review_state": "bogus"}])
        with pytest.raises(ValidationError, match=r"^colour: not a memory attribute \(row 0\)"):
            store.add_chunks([{"content": "a", "colour": "red"}])
        assert store.list_chunks() == []
        ids = store.add_chunks([{"content": f"row {i}", "domain": "finding"} for i in range(5)])
        assert [c.id for c in store.list_chunks()] == ids
        assert {c.memory_kind for c in store.list_chunks()} == {"fact"}

    def test_get_unknown_ids(self, store: SQLiteKnowledgeStore) -> None:
        assert store.get("999") is None
        assert store.get("not-an-id") is None


class TestLifecycle:
    def test_review_state_changes(self, store: SQLiteKnowledgeStore) -> None:
        chunk_id = store.add_chunk("agent guess", source_type="extracted")
        assert store.set_review_state(chunk_id, "confirmed").review_state == "confirmed"
        assert store.set_review_state(chunk_id, "rejected").review_state == "rejected"
        with pytest.raises(ValidationError, match=r"^review_state: 'maybe'"):
            store.set_review_state(chunk_id, "maybe")
        with pytest.raises(StoreError, match=r"no memory with id '404'"):
            store.set_review_state("404", "confirmed")
        events = store.history_position().seq
        for bad in ("404", "not-an-id"):  # the update changes nothing, and no event is kept
            with pytest.raises(StoreError, match=rf"no memory with id '{bad}'"):
                store.set_expires_at(bad, None, by="sam")
            with pytest.raises(StoreError, match=rf"no memory with id '{bad}'"):
                store.set_review_state(bad, "rejected", by="sam")
        assert store.history_position().seq == events

    def test_supersede_inserts_then_invalidates(self, store: SQLiteKnowledgeStore) -> None:
        old_id = store.add_chunk(
            "likes tea", domain="preferences", namespace="project:a", source_type="operator", heading="drinks"
        )
        new_id = store.supersede(old_id, "likes coffee", source_type="chat")
        old, new = store.get(old_id), store.get(new_id)
        assert old is not None and new is not None
        assert old.invalidation_reason == f"superseded_by:{new_id}" and old.superseded_by == new_id
        assert old.invalidated_at is not None and old.content == "likes tea"
        # scope and kind are inherited; provenance and review state are not
        assert (new.namespace, new.memory_kind, new.heading) == ("project:a", "profile", "drinks")
        assert (new.source_type, new.review_state) == ("chat", "pending")
        with pytest.raises(StoreError, match=rf"supersede {new_id} instead"):
            store.supersede(old_id, "likes water")

    def test_failed_insert_leaves_the_old_row_valid(self, db_path: Path) -> None:
        embedder = FailingEmbedder()
        with SQLiteKnowledgeStore(db_path, embedder=embedder) as store:
            old_id = store.add_chunk("version one")
            embedder.fail = True
            with pytest.raises(EmbedderError, match=r"RuntimeError: embedding service unavailable; the write was refused and nothing was stored"):
                store.supersede(old_id, "version two")
            with pytest.raises(ValidationError, match=r"^memory_kind"):
                store.supersede(old_id, "version two", memory_kind="nope")
            old = store.get(old_id)
            assert old is not None and old.invalidated_at is None and old.is_deliverable()
            assert [c.id for c in store.list_chunks()] == [old_id]

    def test_failure_inside_the_transaction_rolls_back_both(self, store: SQLiteKnowledgeStore) -> None:
        old_id = store.add_chunk("version one")
        store.conn.execute(
            "CREATE TRIGGER boom BEFORE UPDATE OF invalidated_at ON chunks BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )
        with pytest.raises(StoreError, match=r": a constraint of the store refused the write \(disk says no\); nothing was written$"):
            store.supersede(old_id, "version two")
        assert [c.content for c in store.list_chunks()] == ["version one"]
        old = store.get(old_id)
        assert old is not None and old.is_deliverable()

    def test_invalidate(self, store: SQLiteKnowledgeStore) -> None:
        a, b = store.add_chunk("a"), store.add_chunk("b")
        assert store.invalidate_chunk(a, reason="wrong").invalidation_reason == "wrong"
        assert store.invalidate_chunk(b, superseded_by=store.add_chunk("c")).superseded_by is not None
        with pytest.raises(StoreError, match=r"already invalidated"):
            store.invalidate_chunk(a)
        with pytest.raises(ValidationError, match=r"^reason: use superseded_by"):
            store.invalidate_chunk(store.add_chunk("d"), reason="superseded_by:1")
        with pytest.raises(StoreError, match=r"no memory with id '77'"):
            store.invalidate_chunk(store.add_chunk("e"), superseded_by="77")

    def test_purge_never_deletes_a_superseded_row(self, store: SQLiteKnowledgeStore) -> None:
        superseded = store.add_chunk("old fact", expires_at=NOW - timedelta(days=1))
        successor = store.supersede(superseded, "new fact", expires_at=NOW - timedelta(days=1))
        expired = store.add_chunk("stale", expires_at=NOW - timedelta(days=1))
        deleted = store.add_chunk("deleted")
        store.invalidate_chunk(deleted, reason="deleted by operator")
        keep = store.add_chunk("keep", expires_at=NOW + timedelta(days=1))
        rejected = store.add_chunk("rejected")
        store.set_review_state(rejected, "rejected")
        assert store.purge(now=NOW) == 2
        remaining = {c.id for c in store.list_chunks()}
        assert remaining == {superseded, successor, keep, rejected}
        assert expired not in remaining and deleted not in remaining

    def test_set_expires_at(self, store: SQLiteKnowledgeStore) -> None:
        chunk_id = store.add_chunk("x")
        assert store.set_expires_at(chunk_id, "2030-01-01T00:00:00Z").expires_at == datetime(
            2030, 1, 1, tzinfo=UTC
        )
        assert store.set_expires_at(chunk_id, None).expires_at is None


class TestFilters:
    @pytest.fixture
    def rows(self, store: SQLiteKnowledgeStore) -> dict[str, str]:
        ids = {
            "hot": store.add_chunk("always say hi", domain="hot", source_type="operator"),
            "pending": store.add_chunk("agent fact", domain="finding", source_type="extracted"),
            "rejected": store.add_chunk("bad fact", domain="finding", source_type="extracted"),
            "expired": store.add_chunk("old news", expires_at=NOW - timedelta(seconds=1)),
            "future": store.add_chunk("fresh news", expires_at=NOW + timedelta(days=1)),
            "on_demand": store.add_chunk("tool only", delivery_policy="on_demand"),
            "explicit_retrieved": store.add_chunk("retrieved", delivery_policy="retrieved"),
            "proj_a": store.add_chunk("alpha secret", namespace="project:a"),
            "proj_b": store.add_chunk("beta secret", namespace="project:b"),
            "session": store.add_chunk("session note", namespace="session:x"),
        }
        store.set_review_state(ids["rejected"], "rejected")
        ids["superseded"] = store.add_chunk("superseded news")
        ids["successor"] = store.supersede(ids["superseded"], "successor news")
        return ids

    def test_deliverable(self, store: SQLiteKnowledgeStore, rows: dict[str, str]) -> None:
        got = {c.id for c in store.list_chunks(deliverable=True, now=NOW)}
        assert got == set(rows.values()) - {rows["rejected"], rows["expired"], rows["superseded"]}
        assert {c.id for c in store.list_chunks(now=NOW)} == set(rows.values())

    def test_expiry_is_relative_to_now(self, store: SQLiteKnowledgeStore, rows: dict[str, str]) -> None:
        later = NOW + timedelta(days=2)
        assert rows["future"] not in {c.id for c in store.list_chunks(deliverable=True, now=later)}

    def test_delivery_policy_retrieved_matches_null(
        self, store: SQLiteKnowledgeStore, rows: dict[str, str]
    ) -> None:
        retrieved = {c.id for c in store.list_chunks(delivery_policy="retrieved")}
        assert rows["explicit_retrieved"] in retrieved and rows["pending"] in retrieved
        assert rows["hot"] not in retrieved and rows["on_demand"] not in retrieved
        assert [c.id for c in store.list_chunks(delivery_policy="always")] == [rows["hot"]]

    def test_kind_review_and_scope_filters(self, store: SQLiteKnowledgeStore, rows: dict[str, str]) -> None:
        assert {c.id for c in store.list_chunks(memory_kind="fact")} == {rows["pending"], rows["rejected"]}
        assert [c.id for c in store.list_chunks(review_state="rejected")] == [rows["rejected"]]
        assert [c.id for c in store.list_chunks(namespace="project:a")] == [rows["proj_a"]]
        scoped = {c.id for c in store.list_chunks(namespaces=["", "project:b"])}
        assert rows["proj_b"] in scoped and rows["proj_a"] not in scoped and rows["session"] not in scoped
        assert store.list_chunks(namespaces=[]) == []
        assert len(store.list_chunks(limit=3)) == 3

    def test_scope_isolation_in_search(self, store: SQLiteKnowledgeStore, rows: dict[str, str]) -> None:
        hits = store.search("secret", namespaces=["", "project:b"], now=NOW)
        assert [h.chunk.id for h in hits] == [rows["proj_b"]]
        both = {h.chunk.id for h in store.search("secret", now=NOW)}
        assert both == {rows["proj_a"], rows["proj_b"]}

    def test_search_deliverable_and_superseded(
        self, store: SQLiteKnowledgeStore, rows: dict[str, str]
    ) -> None:
        assert [h.chunk.id for h in store.search("news", now=NOW)] == [rows["future"], rows["successor"]]
        with_old = {h.chunk.id for h in store.search("news", include_superseded=True, now=NOW)}
        assert with_old == {rows["future"], rows["successor"], rows["superseded"]}  # expired still out
        everything = {h.chunk.id for h in store.search("news", deliverable=False, now=NOW)}
        assert rows["expired"] in everything
        assert store.search("bad fact", now=NOW) == [] or all(
            h.chunk.id != rows["rejected"] for h in store.search("bad fact", now=NOW)
        )

    def test_invalid_filter_values(self, store: SQLiteKnowledgeStore) -> None:
        with pytest.raises(ValidationError, match=r"^delivery_policy: "):
            store.list_chunks(delivery_policy="sometimes")
        with pytest.raises(ValidationError, match=r"^namespaces: expected a list"):
            store.search("x", namespaces="project:a")
        with pytest.raises(ValidationError, match=r"^k: "):
            store.search("x", k=0)


class TestSearch:
    def test_fts_ranks_and_scores(self, store: SQLiteKnowledgeStore) -> None:
        store.add_chunk("the budget is eight percent of the window")
        store.add_chunk("budget budget budget")
        store.add_chunk("unrelated")
        hits = store.search("budget")
        assert [h.rank for h in hits] == [1, 2]
        assert hits[0].score >= hits[1].score
        assert store.search("🎉 ((") == []

    def test_hybrid_search_finds_by_vector_when_words_differ(
        self, hybrid_store: SQLiteKnowledgeStore
    ) -> None:
        target = hybrid_store.add_chunk("quarterly revenue forecast spreadsheet")
        hybrid_store.add_chunk("cats sleep all day")
        # one shared word only reaches FTS; the vector leg ranks the same row first too
        hits = hybrid_store.search("revenue forecast numbers", k=2)
        assert hits[0].chunk.id == target
        assert hybrid_store.vectors_enabled

    def test_vector_leg_contributes(self, hybrid_store: SQLiteKnowledgeStore) -> None:
        a = hybrid_store.add_chunk("alpha beta gamma delta")
        hybrid_store.add_chunk("epsilon zeta")
        # "kappa" is in no row; the vector leg returns both rows, the FTS leg only the first
        hits = hybrid_store.search("alpha kappa", k=5)
        assert [h.chunk.id for h in hits][:1] == [a] and len(hits) == 2
        # fused by rank (reciprocal rank fusion, store.fusion): ranked first by both legs, the
        # first row scores two terms 1 / (C + 1); relevance stays on its own 0-1 scale
        assert hits[0].relevance is not None and 0 < hits[0].relevance <= 1
        assert hits[0].score == pytest.approx(2 / (fusion.FUSION_C + 1))
        # found by the vector leg alone (its second row), the second row scores one term
        assert hits[1].score == pytest.approx(1 / (fusion.FUSION_C + 2))

    @pytest.mark.parametrize("hybrid", [False, True])
    def test_filtered_out_candidates_do_not_hide_deliverable_rows(self, db_path: Path, hybrid: bool) -> None:
        # 300 better-ranked but rejected rows exceed the over-fetched candidates (8 * k):
        # the store must fall back to filtering before the cut, not return nothing.
        with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder() if hybrid else None) as store:
            store.add_chunks([{"content": "apple apple", "review_state": "rejected"}] * 300)
            wanted = store.add_chunk("an apple among many other quite different words here")
            assert [h.chunk.id for h in store.search("apple", k=3)] == [wanted]
            assert len(store.search("apple", k=3, deliverable=False)) == 3

    def test_hybrid_respects_filters(self, hybrid_store: SQLiteKnowledgeStore) -> None:
        a = hybrid_store.add_chunk("alpha secret plan", namespace="project:a")
        b = hybrid_store.add_chunk("beta secret plan", namespace="project:b")
        hybrid_store.set_review_state(b, "rejected")
        assert [h.chunk.id for h in hybrid_store.search("secret plan", namespaces=["", "project:b"])] == []
        assert [h.chunk.id for h in hybrid_store.search("secret plan", namespaces=["project:a"])] == [a]

    @pytest.mark.parametrize("use_numpy", [False, True])
    def test_ivf_index_trains_and_keeps_recall(self, db_path: Path, use_numpy: bool) -> None:
        embedder = HashEmbedder(dimensions=32)
        topics = [
            "apple",
            "river",
            "engine",
            "violin",
            "planet",
            "garden",
            "castle",
            "winter",
            "copper",
            "meadow",
        ]
        # The synthetic rows repeat on purpose (600 rows, 100 texts): deduplication off.
        with SQLiteKnowledgeStore(
            db_path,
            embedder=embedder,
            vector_index_min_rows=300,
            consolidation=Consolidation(deduplicate=False),
        ) as store:
            rows = [
                {"content": f"{topics[i % 10]} {topics[(i // 10) % 10]} {topics[(i * 7) % 10]}"}
                for i in range(600)
            ]
            store.add_chunks(rows)  # crosses the threshold: trained automatically
            assert store.train_vector_index(use_numpy=use_numpy) >= 15
            lists = store.conn.execute("SELECT count(*) FROM _vec_centroids").fetchone()[0]
            assert lists >= 15
            unassigned = store.conn.execute(
                "SELECT count(*) FROM chunks_vec WHERE key < (1 << 40)"
            ).fetchone()[0]
            assert unassigned == 0
            late = store.add_chunk("violin castle meadow")
            late_list = store.conn.execute(
                "SELECT key >> 40 FROM chunks_vec WHERE chunk_id = ?", (int(late),)
            )
            assert late_list.fetchone()[0] > 0  # assigned to a trained list at insert
            queries = [f"{topics[a]} {topics[b]}" for a in range(10) for b in range(0, 10, 3)]
            agree = 0
            for query in queries:
                exact = store.vector_neighbours(query, 10, probes=10_000)
                approx = store.vector_neighbours(query, 10)
                assert len(exact) == 10
                agree += len(set(exact) & set(approx))
            assert agree / (10 * len(queries)) >= 0.9

    def test_training_does_not_block_other_writers(self, db_path: Path) -> None:
        embedder = HashEmbedder(dimensions=16)
        # The synthetic rows repeat on purpose (300 rows, 85 texts): deduplication off.
        with SQLiteKnowledgeStore(
            db_path,
            embedder=embedder,
            vector_index_min_rows=10**9,
            consolidation=Consolidation(deduplicate=False),
        ) as store:
            store.add_chunks([{"content": f"word{i % 17} other{i % 5}"} for i in range(300)])
            written: list[str] = []
            real_step = store._kmeans_step

            def step_and_write(*args: Any) -> list[bytes]:
                if not written:  # another writer commits while training reads its snapshot
                    with SQLiteKnowledgeStore(db_path, embedder=embedder, busy_timeout_ms=200) as other:
                        written.append(other.add_chunk("written during training"))
                return real_step(*args)

            store._kmeans_step = step_and_write  # type: ignore[method-assign]
            assert store.train_vector_index(use_numpy=False) > 1
            row = store.conn.execute(
                "SELECT key >> 40 FROM chunks_vec WHERE chunk_id = ?", (int(written[0]),)
            )
            assert row.fetchone()[0] > 0  # assigned to a trained list in the swap

    def test_sqlite_vec_failure_warns_once_and_fts_still_works(self, db_path: Path) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with SQLiteKnowledgeStore(
                db_path, embedder=HashEmbedder(), sqlite_vec_path=str(db_path.parent / "missing-vec0")
            ) as store:
                store.add_chunk("full text still works")
                hits = store.search("full text")
                store.search("works")
                assert not store.vectors_enabled
        relevant = [w for w in caught if issubclass(w.category, VectorSearchUnavailableWarning)]
        assert len(relevant) == 1
        assert "sqlite-vec could not be loaded" in str(relevant[0].message)
        assert "full-text (FTS5) only" in str(relevant[0].message)
        assert [h.chunk.content for h in hits] == ["full text still works"]

    def test_no_embedder_no_warning(self, db_path: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            SQLiteKnowledgeStore(db_path).close()

    def test_embedder_dimension_change_is_refused(self, db_path: Path) -> None:
        SQLiteKnowledgeStore(db_path, embedder=HashEmbedder(dimensions=16)).close()
        with pytest.raises(StoreError, match=r"stored vectors have 16 dimensions .* produces 32"):
            SQLiteKnowledgeStore(db_path, embedder=HashEmbedder(dimensions=32))

    def test_purge_removes_vectors_of_deleted_rows(self, hybrid_store: SQLiteKnowledgeStore) -> None:
        gone = hybrid_store.add_chunk("stale vector row", expires_at=NOW - timedelta(days=1))
        kept = hybrid_store.add_chunk("fresh vector row")
        assert hybrid_store.purge(now=NOW) == 1
        remaining = [r[0] for r in hybrid_store.conn.execute("SELECT chunk_id FROM chunks_vec")]
        assert remaining == [int(kept)] and int(gone) not in remaining

    def test_reindex_embeds_rows_written_without_an_embedder(self, db_path: Path) -> None:
        with SQLiteKnowledgeStore(db_path) as plain:
            plain.add_chunk("written before vectors")
        with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder()) as store:
            assert store.reindex_vectors() == 1
            assert store.reindex_vectors() == 0


class TestOpening:
    def test_not_sqlite(self, tmp_path: Path) -> None:
        path = tmp_path / "notes.sqlite3"
        path.write_text("just some text, not a database\n" * 100)
        with pytest.raises(StoreError, match=r"notes\.sqlite3: not a SQLite database"):
            SQLiteKnowledgeStore(path)

    def test_corrupt_sqlite(self, tmp_path: Path) -> None:
        path = tmp_path / "corrupt.sqlite3"
        with SQLiteKnowledgeStore(path) as store:
            store.add_chunks([{"content": f"row {i} " * 20} for i in range(300)])
        data = bytearray(path.read_bytes())
        data[100:] = b"\xff" * (len(data) - 100)
        path.write_bytes(bytes(data))
        with pytest.raises(StoreError, match=r"corrupt\.sqlite3: .*corrupt"):
            SQLiteKnowledgeStore(path)

    def test_newer_schema_is_refused_naming_both_versions(self, db_path: Path) -> None:
        SQLiteKnowledgeStore(db_path).close()
        conn = apsw.Connection(str(db_path))
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.close()
        with pytest.raises(
            StoreError, match=rf"schema version {SCHEMA_VERSION + 1}.*schema version {SCHEMA_VERSION}"
        ):
            SQLiteKnowledgeStore(db_path)

    def test_create_false(self, tmp_path: Path) -> None:
        with pytest.raises(StoreError, match=r"no store here \(no such file\), and nothing was created"):
            open_store(tmp_path / "absent.sqlite3", create=False)

    def test_directory(self, tmp_path: Path) -> None:
        with pytest.raises(StoreError, match=r"is a directory"):
            open_store(tmp_path)

    def test_closed_store(self, db_path: Path) -> None:
        store = open_store(db_path)
        store.close()
        store.close()
        with pytest.raises(StoreError, match=r"the store is closed"):
            store.get("1")

    def test_default_db_path(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.setenv("CONTEXTPLANE_DB", str(tmp_path / "x.sqlite3"))
        assert default_db_path() == tmp_path / "x.sqlite3"
        monkeypatch.delenv("CONTEXTPLANE_DB")
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        assert default_db_path() == tmp_path / "data" / "contextplane" / "memory.sqlite3"
