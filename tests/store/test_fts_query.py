"""Raw user text must never become an FTS5 syntax error, and must still find the words."""

from __future__ import annotations

from collections.abc import Iterator

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.fts_query import MAX_TERMS, fts_terms, to_match_expression

HOSTILE = [
    'say "hello',
    '"unbalanced',
    "a AND",
    "OR",
    "NOT this",
    "x NEAR y",
    "NEAR(a b, 3)",
    "(((",
    "a) OR (b",
    "*",
    "pre*",
    "**a**",
    "col:value",
    "^start",
    "-minus +plus",
    "emoji 🎉🔥 party",
    "🎉",
    "",
    "   ",
    "'single' quotes",
    "C++ & C#",
    "日本語のテキスト",
    "naïve café",
    "a\x00b",
    "\\",
    "{a b}",
    "AND OR NOT NEAR",
]


@pytest.fixture(scope="module")
def fts() -> Iterator[apsw.Connection]:
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='unicode61 remove_diacritics 2')")
    conn.executemany(
        "INSERT INTO t(content) VALUES (?)",
        [("say hello to the party",), ("prefix matching works",), ("cafe naive",), ("near and far",)],
    )
    yield conn
    conn.close()


def _run(conn: apsw.Connection, text: str) -> list[int]:
    expression = to_match_expression(text)
    if expression is None:
        return []
    return [r[0] for r in conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank", (expression,))]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_never_raises(fts: apsw.Connection, text: str) -> None:
    _run(fts, text)


def test_words_still_match(fts: apsw.Connection) -> None:
    assert _run(fts, 'say "hello') == [1]
    assert _run(fts, "NEAR(") == [4]  # the word near, not the operator
    assert _run(fts, "pre*") == [2]
    assert _run(fts, "naïve café") == [3]
    assert _run(fts, "emoji 🎉🔥 party") == [1]


def test_operators_become_quoted_words() -> None:
    assert to_match_expression("a AND b") == '"a" OR "and" OR "b"'
    assert to_match_expression("🎉 (") is None
    assert fts_terms("x* x*") == ['"x"*']


def test_term_count_is_bounded() -> None:
    assert len(fts_terms(" ".join(f"w{i}" for i in range(500)))) == MAX_TERMS


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text())
def test_arbitrary_text_never_raises(fts: apsw.Connection, text: str) -> None:
    _run(fts, text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("\"()*:^-+ANDORTNE ab🎉\\{}'")), max_size=40))
def test_operator_soup_never_raises(text: str) -> None:
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
    conn.execute("INSERT INTO t(content) VALUES ('a b and or not near')")
    _run(conn, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80))
def test_store_search_never_raises(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    global _STORE
    if _STORE is None:
        _STORE = SQLiteKnowledgeStore(tmp_path_factory.mktemp("fts") / "m.sqlite3")
        _STORE.add_chunk("hello party people")
    _STORE.search(text, 5)


_STORE: SQLiteKnowledgeStore | None = None


def teardown_module() -> None:
    if _STORE is not None:
        _STORE.close()
