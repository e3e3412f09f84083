"""The write spec (``contextplane.backends.spec``, defined in ``store.write_spec``): ``add_chunk``'s
keywords, defaults and checks written once, and every store using it, so a bad row is refused
the same way, naming the same field and row, on the embedded store, the in-memory reference
backend and the PostgreSQL store."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextplane.backends import spec
from contextplane.backends.memory import InMemoryKnowledgeStore
from contextplane.errors import ValidationError
from contextplane.store import SQLiteKnowledgeStore, write_spec
from contextplane.store.columns import ADD_FIELDS
from contextplane.store.protocol import KnowledgeStore
from contextplane_postgres.store import PostgresKnowledgeStore
from tests.store.helpers import opened_store


def _parameters(function: Any) -> list[tuple[str, Any, Any, Any]]:
    signature = inspect.signature(function)
    return [(p.name, p.kind, p.default, p.annotation) for p in signature.parameters.values()]


def test_the_protocol_states_the_signature_the_spec_implements() -> None:
    assert _parameters(KnowledgeStore.add_chunk) == _parameters(spec.ChunkWrites.add_chunk)
    keywords = [(name, default) for name, _, default, _ in _parameters(spec.ChunkWrites.add_chunk)[2:]]
    assert keywords == list(spec.KEYWORDS)
    assert spec.WRITE_FIELDS == ADD_FIELDS, "the embedded store's columns accept what the spec does"
    assert spec.ChunkWrites is write_spec.ChunkWrites


@pytest.mark.parametrize("store_class", [SQLiteKnowledgeStore, InMemoryKnowledgeStore, PostgresKnowledgeStore])
def test_every_store_writes_through_the_spec(store_class: type) -> None:
    assert store_class.add_chunk is spec.ChunkWrites.add_chunk
    assert store_class.add_chunks is spec.ChunkWrites.add_chunks
    assert store_class._write is not spec.ChunkWrites._write


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with opened_store(request.param, tmp_path) as opened:
        yield opened


BAD_ROWS: list[tuple[list[dict[str, Any]], str]] = [
    ([{"content": "fine"}, {"content": "x", "colour": "red"}], r"^colour: not a memory attribute \(row 1\)"),
    ([{"content": "fine"}, {"heading": "no content"}], r"^content: missing \(row 1\)"),
    # several bad values: the same one is named first on every store
    ([{"content": "x", "namespace": "not a scope", "heading": 5}], r"^heading: expected text \(str\), got int"),
    ([{"content": "x", "namespace": "not a scope", "epoch": 5}], r"^namespace: 'not a scope' is not a scope"),
]


@pytest.mark.parametrize(("rows", "message"), BAD_ROWS)
def test_a_bad_row_is_refused_alike_and_nothing_is_written(store: Any, rows: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        store.add_chunks(rows)
    assert store.list_chunks() == []


def test_the_defaults_are_the_specs(store: Any) -> None:
    chunk = store.get(store.add_chunk("The deploy window is Tuesday"))
    assert (chunk.domain, chunk.source_type, chunk.namespace, chunk.heading, chunk.epoch) == ("general", "", "", "", "")
    assert chunk.occurred_at is None and chunk.expires_at is None
    w = spec.validate_write({"content": "The deploy window is Tuesday"}, 0, chunk.created_at)
    assert (chunk.memory_kind, chunk.delivery_policy, chunk.review_state) == (
        w.stamp.memory_kind,
        w.stamp.delivery_policy,
        w.stamp.review_state,
    )
