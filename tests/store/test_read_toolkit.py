"""The backend toolkit's shared pieces (issue 25, step 5): the read spec (``list_chunks``,
``count_chunks`` and ``search`` written once), the filter spec rendered by dialect, the row codec
and the write outcomes, tested directly. Each replaced a block the embedded, PostgreSQL and
in-memory stores wrote out each; here each piece must say the same thing in every dialect and
for every store (the PostgreSQL half over a live server: ``tests/postgres/test_toolkit.py``)."""

from __future__ import annotations

import inspect
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from contextplane.backends import spec
from contextplane.backends.memory import InMemoryKnowledgeStore
from contextplane.errors import ValidationError
from contextplane.memory.consolidation import WriteOutcome
from contextplane.memory.model import MemoryChunk, format_timestamp
from contextplane.memory.stamps import legacy_kind_and_policy
from contextplane.store import SQLiteKnowledgeStore, columns, filters, outcomes, row_codec
from contextplane.store import sql as sqlite_sql
from contextplane.store.protocol import KnowledgeStore
from contextplane_postgres import codec as pg_codec
from contextplane_postgres import sql as pg_sql
from contextplane_postgres.store import INSERT_COLUMNS as PG_INSERT_COLUMNS
from contextplane_postgres.store import PostgresKnowledgeStore

STORES = [SQLiteKnowledgeStore, InMemoryKnowledgeStore, PostgresKnowledgeStore]
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _public(function: Any) -> list[tuple[str, Any, Any, Any]]:
    signature = inspect.signature(function)
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in signature.parameters.values()
        if not p.name.startswith("_")
    ]


# ------------------------------------------------------------------ the read spec


@pytest.mark.parametrize("name", ["list_chunks", "search"])
def test_the_protocol_states_the_signature_the_read_spec_implements(name: str) -> None:
    """The protocol is the contract, the spec its one implementation: every keyword the protocol
    names, the spec takes in the same place with the same default; the spec adds only
    ``full_text`` (optional in the contract) and its private ``_on``/``_vector``."""
    contract = _public(getattr(KnowledgeStore, name))
    implemented = _public(getattr(spec.ChunkReads, name))
    assert implemented[: len(contract)] == contract
    assert [p[0] for p in implemented[len(contract) :]] == (["full_text"] if name == "search" else [])


def test_the_protocol_states_the_lifecycle_signature_the_spec_implements() -> None:
    assert _public(KnowledgeStore.invalidate_chunk) == _public(spec.ChunkLifecycle.invalidate_chunk)


@pytest.mark.parametrize("store_class", STORES)
def test_every_store_reads_through_the_spec(store_class: type) -> None:
    for name in ("list_chunks", "count_chunks", "search"):
        assert getattr(store_class, name) is getattr(spec.ChunkReads, name), name
    assert store_class._list is not spec.ChunkReads._list
    assert store_class.__exit__ is spec.ClosingStore.__exit__, "a store closes itself on leaving a with block"
    assert store_class.invalidate_chunk is spec.ChunkLifecycle.invalidate_chunk


def test_the_toolkit_is_one_set_of_objects() -> None:
    assert spec.list_sql is filters.list_sql and spec.SQLITE is filters.SQLITE
    assert spec.ChunkReads.__module__ == "contextplane.store.read_spec"
    assert isinstance(pg_sql.POSTGRES, spec.Dialect)


# ------------------------------------------------------------------ the filter spec by dialect

QUERIES = [
    filters.ListQuery(),
    filters.ListQuery(deliverable=True, now=NOW),
    filters.ListQuery(memory_kind="fact", review_state="pending", delivery_policy="retrieved"),
    filters.ListQuery(review_state="confirmed", delivery_policy="always", namespace="project:a"),
    filters.ListQuery(namespaces=["global", "project:a"], limit=5, offset=2),
    filters.ListQuery(namespaces=[], occurred_after=NOW - timedelta(days=1), occurred_before=NOW),
    filters.ListQuery(delivery_policy="on_demand", offset=3),
    filters.ListQuery(deliverable=True, now=NOW, namespaces=["session:s1"], limit=0),
]


def _as_postgres(statement: str) -> str:
    """SQLite's rendering in PostgreSQL's spelling: what the dialects differ in, and only that."""
    statement = re.sub(r":(\w+)", r"%(\1)s", statement)
    statement = statement.replace(" != ", " <> ").replace(
        "substr(c.invalidation_reason, 1, 14)", "left(c.invalidation_reason, 14)"
    )
    statement = re.sub(r"c\.namespace IN \((%\(ns\d+\)s(, )?)+\)", "c.namespace = ANY(%(ns)s)", statement)
    statement = re.sub(
        r" LIMIT (-?\d+)", lambda m: "" if m.group(1) == "-1" else " LIMIT %(limit)s", statement
    )
    statement = re.sub(r" OFFSET \d+", " OFFSET %(offset)s", statement)
    return statement.replace(" WHERE 0", " WHERE false").replace(" AND 0", " AND false")


def _sqlite_params_as_postgres(params: dict[str, Any], query: filters.ListQuery) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = [params[k] for k in sorted(params) if re.fullmatch(r"ns\d+", k)]
    if names:
        out["ns"] = names
    for key, value in params.items():
        if re.fullmatch(r"ns\d+", key):
            continue
        out[key] = (
            datetime.fromisoformat(value) if key in ("now", "occurred_after", "occurred_before") else value
        )
    if query.limit is not None:
        out["limit"] = query.limit
    if query.offset:
        out["offset"] = query.offset
    return out


@pytest.mark.parametrize("count", [False, True], ids=["list", "count"])
@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_a_filter_renders_the_same_rule_in_both_dialects(query: filters.ListQuery, count: bool) -> None:
    lite, lite_params = filters.list_sql(filters.SQLITE, query, columns.SELECT_COLUMNS, count=count)
    pg, pg_params = filters.list_sql(pg_sql.POSTGRES, query, pg_codec.SELECT_COLUMNS, count=count)
    assert _as_postgres(lite.replace(columns.SELECT_COLUMNS, pg_codec.SELECT_COLUMNS)) == pg
    expected = _sqlite_params_as_postgres(lite_params, query)
    if count:
        expected.pop("limit", None)
        expected.pop("offset", None)
    assert expected == pg_params
    assert ":" not in re.sub(r"'[^']*'|::\w+", "", pg), "a SQLite placeholder in PostgreSQL's statement"
    assert "%(" not in lite


def test_the_old_entry_points_render_the_spec() -> None:
    """``store.sql`` and ``contextplane_postgres.sql`` keep their functions, now the spec's."""
    kw: dict[str, Any] = {"deliverable": True, "namespaces": ["global"], "limit": 3, "now": NOW}
    assert sqlite_sql.list_sql(**kw) == filters.list_sql(
        filters.SQLITE, filters.ListQuery(**kw), columns.SELECT_COLUMNS
    )
    assert pg_sql.list_sql(**kw) == filters.list_sql(
        pg_sql.POSTGRES, filters.ListQuery(**kw), pg_codec.SELECT_COLUMNS
    )
    clauses: list[str] = []
    pg_sql.scope_filter(["a\x00b"], params := {}, clauses)
    assert params == {"ns": ["a\ue0000b"]} and clauses == ["c.namespace = ANY(%(ns)s)"]  # text escaped


@pytest.mark.parametrize("dialect", [filters.SQLITE, pg_sql.POSTGRES], ids=["sqlite", "postgres"])
@pytest.mark.parametrize(
    ("query", "message"),
    [
        (filters.ListQuery(limit=-1), r"^limit: expected a non-negative whole number, got -1"),
        (filters.ListQuery(offset=True), r"^offset: expected a non-negative whole number, got True"),
        (filters.ListQuery(namespaces="global"), r"^namespaces: expected a list of scopes"),
        (filters.ListQuery(memory_kind="feeling"), r"^memory_kind"),
        (filters.ListQuery(occurred_after="yesterday"), r"^occurred_after"),
    ],
)
def test_a_bad_filter_is_refused_alike_in_every_dialect(
    dialect: filters.Dialect, query: filters.ListQuery, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        filters.list_sql(dialect, query, "c.id")


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_every_listing_keyword_reaches_the_store(kind: str, tmp_path: Path) -> None:
    """The spec packs the caller's keywords in order: a filter that reached the wrong field
    would list other rows (the SQL stores and the in-memory one read the same ``ListQuery``)."""
    with (
        InMemoryKnowledgeStore()
        if kind == "memory"
        else SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store
    ):
        store.add_chunks(
            [
                {"content": "fact in a", "namespace": "project:a", "memory_kind": "fact"},
                {"content": "always in b", "namespace": "project:b", "delivery_policy": "always"},
                {
                    "content": "said yesterday",
                    "namespace": "project:a",
                    "occurred_at": NOW - timedelta(days=1),
                },
            ]
        )
        listed = lambda **kw: [c.content for c in store.list_chunks(**kw)]  # noqa: E731
        assert listed(namespaces=["project:a"]) == ["fact in a", "said yesterday"]
        assert listed(namespace="project:b") == ["always in b"]
        assert listed(delivery_policy="always") == ["always in b"]
        assert listed(occurred_after=NOW - timedelta(days=2), occurred_before=NOW) == ["said yesterday"]
        assert listed(limit=1, offset=1) == ["always in b"]
        assert store.count_chunks(namespaces=["project:a"]) == 2
        assert [h.chunk.content for h in store.search("fact", namespaces=["project:a"], full_text=True)] == [
            "fact in a"
        ]


# ------------------------------------------------------------------ the row codec


def _full_chunk(**changes: Any) -> MemoryChunk:
    values: dict[str, Any] = {
        "id": "41",
        "content": "Deploys \x00 freeze \ue000 on Fridays",
        "domain": "ops",
        "source_type": "operator",
        "memory_kind": "standing",
        "delivery_policy": "always",
        "review_state": "confirmed",
        "namespace": "project:a",
        "heading": "Deploys",
        "source": "runbook.md",
        "subject": "deploy-freeze",
        "epoch": "v2",
        "invalidated_at": NOW,
        "invalidation_reason": "superseded_by:42",
        "expires_at": NOW + timedelta(days=30),
        "created_at": NOW - timedelta(days=3),
        "updated_at": NOW - timedelta(days=1),
        "occurred_at": NOW - timedelta(days=4),
    }
    values.update(changes)
    return MemoryChunk(**values)


def _same(value: Any) -> Any:
    return value


@pytest.mark.parametrize(
    "chunk",
    [
        _full_chunk(),
        _full_chunk(
            invalidated_at=None,
            invalidation_reason=None,
            expires_at=None,
            occurred_at=None,
            delivery_policy=None,
        ),
    ],
    ids=["full", "sparse"],
)
def test_the_codec_round_trips_a_row_in_each_store_s_cells(chunk: MemoryChunk) -> None:
    """The embedded store's cells (ISO text, select list in table order) and PostgreSQL's
    (escaped text, ``timestamptz``, the read order) both read back as the chunk written."""
    lite = row_codec.chunk_cells(chunk, columns.COLUMN_NAMES, _same, format_timestamp)
    assert columns.chunk_from_row((*lite, 0.5)) == chunk  # a search row's score after the cells
    pg = row_codec.chunk_cells(chunk, pg_codec.COLUMNS, pg_codec.enc, _same)
    assert "\x00" not in pg[1] and pg_codec.chunk_from_row((*pg, 0.5, 0.5)) == chunk
    assert tuple(PG_INSERT_COLUMNS) == columns.COLUMN_NAMES, "both stores insert the same columns"


def test_the_codec_reads_legacy_nulls_alike_on_both_stores() -> None:
    """NULL kind is the D4 table applied to ``domain``, NULL review state pending, an unknown
    policy retrieved (None): the rule is written once, so both readers say the same."""
    chunk = _full_chunk(invalidated_at=None, invalidation_reason=None)
    lite = row_codec.chunk_cells(chunk, columns.COLUMN_NAMES, _same, format_timestamp)
    pg = row_codec.chunk_cells(chunk, pg_codec.COLUMNS, pg_codec.enc, _same)
    for cells, names, read in (
        (lite, columns.COLUMN_NAMES, columns.chunk_from_row),
        (pg, pg_codec.COLUMNS, pg_codec.chunk_from_row),
    ):
        legacy = list(cells)
        for name, value in (("memory_kind", None), ("review_state", None), ("delivery_policy", "sometimes")):
            legacy[names.index(name)] = value
        read_back = read(legacy)
        kind = legacy_kind_and_policy("ops", "operator")[0]
        assert (read_back.memory_kind, read_back.review_state, read_back.delivery_policy) == (
            kind,
            "pending",
            None,
        )
    lite_nulls = list(lite)
    lite_nulls[columns.COLUMN_NAMES.index("heading")] = None  # a legacy NULL text cell on SQLite
    assert columns.chunk_from_row(lite_nulls).heading == ""


def test_a_compiled_reader_is_plain_python() -> None:
    """The reader is compiled once per store: no per-cell decoder call is left to dispatch."""
    reader = row_codec.compile_reader(
        pick="row", decode={k: "{}" for k in ("content", "text", "reason", "time", "created")}, names={}
    )
    cells = row_codec.chunk_cells(_full_chunk(), row_codec.READ_ORDER, _same, _same)
    assert reader(cells) == _full_chunk()
    assert reader.__code__.co_filename.startswith("<row codec")


# ------------------------------------------------------------------ write outcomes


def test_write_outcomes_say_what_consolidation_decided() -> None:
    results, stored = outcomes.write_outcomes(
        6,
        new_ids={0: 10, 3: 11, 4: 12, 5: 13},
        duplicate_of={1: 0, 2: "7"},
        outdated_of={},
        superseded={3: ["5"]},
        near={4: (("8", 0.93),), 5: (("5", 0.9),)},
    )
    assert results == ["10", "10", "7", "11", "12", "13"]
    assert [r.outcome for r in results] == [
        "stored",
        "duplicate",
        "duplicate",
        "superseded",
        "near_duplicate",
        "near_duplicate",
    ]
    assert results[1].duplicate_of == "10" and results[2].duplicate_of == "7"
    assert results[3].superseded == ("5",) and results[4].near_duplicates == (("8", 0.93),)
    assert list(stored) == [0, 3, 4, 5] and all(isinstance(r, WriteOutcome) for r in stored.values())
    outdated, _ = outcomes.write_outcomes(1, {}, {}, {0: ("9", "4")}, {}, {})
    assert (outdated[0], outdated[0].outcome, outdated[0].duplicate_of) == ("9", "outdated", "4")


# ------------------------------------------------------------------ the injection-log row


def test_an_injection_row_round_trips_through_the_shared_cells(tmp_path: Path) -> None:
    """The cells an insert writes and the row read back, the same for every backend (PostgreSQL
    escapes the session id's NUL; ``tests/postgres`` logs through it), and through the embedded
    backend's injection log end to end."""
    from contextplane.backends.record_codec import injection_cells, injection_row
    from contextplane.backends.sqlite.injections import SQLiteInjectionLog
    from contextplane.records.injections import InjectionRow

    row = InjectionRow("s\x00-1", 3, "2026-05-01T12:00:00Z", "full", 120, 480, 4000, {"facts": ["2", "1"]})
    assert injection_row((7, *injection_cells(row))) == attrs.evolve(row, id=7)
    escaped = injection_cells(row, pg_codec.enc)
    assert (
        "\x00" not in escaped[0] and injection_row((7, *escaped), pg_codec.dec).session_id == row.session_id
    )
    log = SQLiteInjectionLog(tmp_path / "records.sqlite3")
    try:
        stored_id = log.record(row)
        (read,) = log.rows()
    finally:
        log.close()
    assert read.id == stored_id and (read.session_id, read.delivered, read.budget_chars) == (
        row.session_id,
        row.delivered,
        4000,
    )
