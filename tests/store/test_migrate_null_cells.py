"""One rule for NULL cells of a version-1 table, whatever its shape (issue 26, item 9).

The rule (docs: README, ``contextplane migrate``): a NULL cell of a version-1 column reads as
that column's version-1 default (``domain`` 'general'; ``content``, ``heading``, ``source``,
``subject``, ``source_type``, ``namespace``, ``epoch`` ''; a missing ``created_at`` or
``updated_at`` from the other), before the D4 classification and the D7 review state are
derived from it. It used to hold only for shapes the migration rewrites (no AUTOINCREMENT, no
id column...); a table already in the version-1 shape kept its NULL cells, so the same row
became ``general``/``reference`` in one store and ``legacy`` in another.

The property: the same rows, written into tables of any shape (id kind, column subset,
nullability), migrate to the same memories, each as the rule says; and the migrated store
takes every public read and write.
"""

from __future__ import annotations

from pathlib import Path

import apsw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextplane.memory import legacy_kind_and_policy
from contextplane.memory.trust import initial_review_state, trust_tier
from contextplane.store import SQLiteKnowledgeStore

NULLABLE = ["heading", "source", "subject", "source_type", "namespace", "epoch"]
IDENTS = {
    "pk_auto": "id INTEGER PRIMARY KEY AUTOINCREMENT",  # the ADR's shape: ALTER only
    "pk": "id INTEGER PRIMARY KEY",  # no AUTOINCREMENT: rewritten
    "rowid": None,  # no id column: rewritten
    "text_pk": "id TEXT PRIMARY KEY",  # rewritten
}
T = "2025-05-05T05:05:05Z"


@st.composite
def rows(draw: st.DrawFn) -> list[dict]:
    out = []
    for i in draw(st.lists(st.integers(1, 30), unique=True, min_size=1, max_size=8)):
        row: dict = {"id": i, "content": f"memo{i} about the deploy window"}
        row["domain"] = draw(st.sampled_from([None, "general", "hot", "preferences", "fact", "doc-stem"]))
        row["source_type"] = draw(st.sampled_from([None, "", "operator", "extracted", "weird"]))
        for column in ("heading", "source", "subject", "namespace", "epoch"):
            row[column] = draw(st.sampled_from([None, "", "v"] if column != "namespace" else [None, "", "project:x"]))
        out.append(row)
    return out


def build(path: Path, ident: str, columns: list[str], data: list[dict]) -> None:
    decl = IDENTS[ident]
    decls = [decl] if decl else []
    decls += ["content TEXT NOT NULL", "domain TEXT DEFAULT 'general'"]  # nullable: NULL cells possible
    decls += [f"{c} TEXT" for c in columns]
    decls += ["created_at TEXT", "updated_at TEXT"]
    conn = apsw.Connection(str(path))
    conn.execute(f"CREATE TABLE chunks ({', '.join(decls)})")
    conn.execute("BEGIN")
    for row in data:
        names = ["content", "domain", *columns, "created_at", "updated_at"]
        values = [row[n] if n not in ("created_at", "updated_at") else T for n in names]
        if decl is None:
            names, values = ["rowid", *names], [row["id"], *values]
        else:
            names, values = ["id", *names], [str(row["id"]) if ident == "text_pk" else row["id"], *values]
        conn.execute(f"INSERT INTO chunks({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", values)
    conn.execute("COMMIT")
    conn.close()


def by_the_rule(row: dict, columns: list[str]) -> tuple:
    """What the rule says a row becomes: NULL cells as v1's defaults, then D4 and D7."""
    domain = "general" if row["domain"] is None else row["domain"]
    source = (row["source_type"] or "") if "source_type" in columns else ""
    kind, policy = legacy_kind_and_policy(domain, source)
    cells = tuple((row[c] or "") if c in columns else "" for c in ("heading", "source", "subject", "namespace"))
    return (row["content"], domain, source, kind, policy, initial_review_state(trust_tier(source)), *cells)


def migrated(path: Path) -> dict[str, tuple]:
    with SQLiteKnowledgeStore(path) as store:
        return {
            c.id: (
                c.content, c.domain, c.source_type, c.memory_kind, c.delivery_policy, c.review_state,
                c.heading, c.source, c.subject, c.namespace,
            )
            for c in store.list_chunks()
        }


def exercise(path: Path, data: list[dict]) -> None:
    """Every public read and write on the migrated store (the project's round-trip rule)."""
    with SQLiteKnowledgeStore(path) as store:
        first = str(min(r["id"] for r in data))
        assert store.get(first) is not None
        assert first in {h.chunk.id for h in store.search(f"memo{first}", k=50)}
        assert sorted(int(c.id) for c in store.list_chunks()) == sorted(r["id"] for r in data)
        with store.consistent_read() as view:
            assert view.get(first) is not None
        before = store.history_position()
        new = store.add_chunk("a memo written after the migration", source_type="operator")
        assert int(new) == max(r["id"] for r in data) + 1
        assert store.set_review_state(first, "confirmed", by="t").review_state == "confirmed"
        assert store.set_expires_at(first, "2099-01-01T00:00:00Z").expires_at is not None
        successor = store.supersede(first, "a replacement memo")
        assert store.get(first).superseded_by == successor  # type: ignore[union-attr]
        assert [e.event for e in store.history(first)] == ["migrated", "review", "expiry", "superseded"]
        with store.as_of(before) as past:
            assert past.get(new) is None and past.get(first).superseded_by is None  # type: ignore[union-attr]
        store.invalidate_chunk(new, reason="test")
        assert store.purge() >= 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=rows(),
    columns=st.lists(st.sampled_from(NULLABLE), unique=True),
    shapes=st.lists(st.sampled_from(sorted(IDENTS)), min_size=2, max_size=3, unique=True),
)
def test_the_same_rows_migrate_the_same_in_every_shape(tmp_path_factory, data, columns, shapes) -> None:
    results = {}
    for ident in shapes:
        path = tmp_path_factory.mktemp(ident) / "memory.sqlite3"
        build(path, ident, columns, data)
        results[ident] = migrated(path)
        expected = {str(r["id"]): by_the_rule(r, columns) for r in data}
        assert results[ident] == expected, ident
    exercise(path, data)


def test_a_null_domain_is_general_in_the_adr_shape_and_a_rewritten_one(tmp_path: Path) -> None:
    """The issue's two shapes: the ADR's table (ALTER only) and one the migration rewrites."""
    row = {"id": 1, "content": "memo1", "domain": None, "source_type": "operator",
           "heading": None, "source": None, "subject": None, "namespace": None, "epoch": None}
    found = []
    for ident in ("pk_auto", "pk"):
        path = tmp_path / ident / "memory.sqlite3"
        path.parent.mkdir()
        build(path, ident, ["source_type", "subject", "namespace"], [row])
        found.append(migrated(path)["1"])
    assert found[0] == found[1]
    assert found[0][1:5] == ("general", "operator", *legacy_kind_and_policy("general", "operator"))


def test_the_dry_run_counts_null_domains_by_the_same_rule(tmp_path: Path) -> None:
    from contextplane.store import migrate as m

    path = tmp_path / "memory.sqlite3"
    row = {"id": 1, "content": "memo1", "domain": None, "source_type": None,
           "heading": None, "source": None, "subject": None, "namespace": None, "epoch": None}
    build(path, "pk_auto", ["source_type"], [row])
    conn = apsw.Connection(str(path))
    try:
        report = m.dry_run(conn, str(path))
        counts = {r.label: r.rows for r in report.mapping}
        assert counts["general/other"] == 1 and counts["anything else"] == 0, counts
        assert "give NULL cells of version-1 columns their version-1 defaults" in report.schema_changes
    finally:
        conn.close()
