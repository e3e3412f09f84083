"""The caller-facing API: incognito refuses writes; recall hides superseded rows by default."""

from __future__ import annotations

import pytest

from contextplane.errors import IncognitoWriteError
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.api import memory_ingest, memory_recall


def test_incognito_write_is_refused_and_nothing_is_written(store: SQLiteKnowledgeStore) -> None:
    with pytest.raises(IncognitoWriteError, match="incognito"):
        memory_ingest(store, "secret from an incognito turn", incognito=True, source_type="chat")
    assert store.list_chunks() == []


def test_ingest_passes_attributes_and_expiry(store: SQLiteKnowledgeStore) -> None:
    chunk_id = memory_ingest(
        store, "remember the launch", source_type="chat", namespace="project:x", expires_in_days=7
    )
    chunk = store.get(chunk_id)
    assert chunk is not None and chunk.namespace == "project:x" and chunk.expires_at is not None
    assert chunk.review_state == "pending"


def test_recall_with_and_without_superseded(store: SQLiteKnowledgeStore) -> None:
    old = memory_ingest(store, "the launch is in May", namespace="project:x")
    new = store.supersede(old, "the launch is in June")
    assert [h.chunk.id for h in memory_recall(store, "launch", 5)] == [new]
    both = memory_recall(store, "launch", 5, include_superseded=True)
    assert {h.chunk.id for h in both} == {old, new}
    assert next(h.chunk for h in both if h.chunk.id == old).superseded_by == new
    assert memory_recall(store, "launch", 5, namespaces=["", "project:y"]) == []
