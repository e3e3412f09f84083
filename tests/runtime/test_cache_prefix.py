"""The cacheable prefix, measured (issue 24 item 3): every snapshot records the hash and length
of what a provider's prompt cache can reuse (the stable prefix, then the history as delivered)
and how much of it the session's previous call shared, naming the prefix section or the
history message that broke the share. The projection comes after it and never counts."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from contextlib import closing
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest
from click.testing import CliRunner
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from contextplane import PluginHost
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.backends.sqlite.snapshots import SCHEMA, SQLiteSnapshotStore
from contextplane.delivery import PLAIN, Callables, tool_key
from contextplane.observability.cli import snapshots
from contextplane.records.cache_prefix import CachePrefix, CacheTracker, tracker_of
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow
from contextplane.runtime import Runtime, open_runtime
from contextplane.testing.memory import InMemoryBackend
from contextplane.types import PrefixSection, StablePrefix
from contextplane_langgraph.frames import message_text

from .conftest import cfg, make_agent

#: A system prompt of a realistic size (a few KB), from three sections.
SECTIONS = {
    "identity": "You are a careful assistant for the orchard team. " * 40,
    "rules": "Never invent facts; cite the memory row you used. " * 60,
    "tools": "search(query): find notes. remember(text): keep a note. " * 40,
}


def stable_prefix(sections: dict[str, str]) -> StablePrefix:
    parts = [
        PrefixSection(name, "test", len(text), hashlib.sha256(text.encode()).hexdigest())
        for name, text in sections.items()
    ]
    return StablePrefix("\n\n".join(sections.values()), tuple(parts))


PREFIX = stable_prefix(SECTIONS)


def user(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"question {n}: what about the pears?"}


def assistant(n: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"answer {n}: the pears are fine."}


def run_session(runtime: Runtime, turns: int, session: str = "s") -> list[dict[str, Any]]:
    """``turns`` turns of one call each, the history growing by the user's question and the
    model's answer per turn; returns the history."""
    history: list[dict[str, Any]] = []
    for n in range(turns):
        turn = runtime.compose(runtime.request(f"q{n}", session_id=session, turn_index=n))
        history.append(user(n))
        runtime.deliver(turn, history, PLAIN, call_index=0)
        history.append(assistant(n))
    return history


def cache_of(snapshot: PromptSnapshot | None) -> CachePrefix:
    assert snapshot is not None and snapshot.cache is not None
    return snapshot.cache


def test_a_growing_session_shares_99_percent_of_its_prefix_with_the_previous_call(host: PluginHost) -> None:
    backend = InMemoryBackend()
    with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
        run_session(runtime, 20)
    snaps = backend.snapshots.list("s")
    assert len(snaps) == 20
    first = cache_of(snaps[0])
    assert first.first and first.shared == 0
    assert first.chars == len(PREFIX.text) + len(user(0)["content"])
    assert first.line() == f"cacheable prefix: {first.chars} chars, the session's first call"
    for before, now in itertools.pairwise(snaps):
        b, c = cache_of(before), cache_of(now)
        assert c.unchanged and c.shared == b.chars, now.key  # all of the previous call's prefix
        assert c.shared / c.chars >= 0.99, (now.key, c.shared, c.chars)
        assert c.chars == len(PREFIX.text) + now.history_chars
        assert c.line() == f"cacheable prefix: {c.chars} chars, unchanged since the previous call"
    assert len({cache_of(s).sha256 for s in snaps}) == 20  # the history is in the hash


def test_a_changed_prefix_section_is_named(host: PluginHost) -> None:
    backend = InMemoryBackend()
    with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
        history = run_session(runtime, 3)
        turn = runtime.compose(runtime.request("q3", session_id="s", turn_index=3))
        changed = stable_prefix({**SECTIONS, "tools": SECTIONS["tools"] + "now: 2026-12-02T04:00Z"})
        runtime.deliver(turn, [*history, user(3)], PLAIN, call_index=0, prefix=changed)
    cache = cache_of(backend.snapshots.get("s", 3, 0))
    assert cache.sections == ("tools",) and not cache.unchanged
    unchanged_head = len(SECTIONS["identity"]) + len(SECTIONS["rules"]) + 4 + len(SECTIONS["tools"])
    assert cache.shared == unchanged_head  # up to where the tools section's text changed
    assert cache.line() == (
        f"cacheable prefix: {cache.chars} chars, {unchanged_head} shared with the previous call; "
        "broken by section 'tools'"
    )


def test_rewritten_history_is_reported_at_its_message(host: PluginHost) -> None:
    backend = InMemoryBackend()
    with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
        history = run_session(runtime, 3)
        turn = runtime.compose(runtime.request("q3", session_id="s", turn_index=3))
        edited = [*history[:2], {"role": "user", "content": "question 1, reworded"}, *history[3:], user(3)]
        runtime.deliver(turn, edited, PLAIN, call_index=0)
    cache = cache_of(backend.snapshots.get("s", 3, 0))
    shared = len(PREFIX.text) + sum(len(m["content"]) for m in history[:2])
    assert (cache.history_at, cache.shared, cache.sections) == (2, shared, ())
    assert cache.line().endswith(f"{shared} shared with the previous call; history rewritten at message 2")


def test_the_projection_never_counts(host: PluginHost) -> None:
    """The projection comes after the cacheable prefix: another projection (other rows, in
    another order, another turn's ids) changes nothing in the figure, nor does a context frame
    an old checkpoint still holds (stripped, never sent)."""
    backend = InMemoryBackend()
    with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
        history = [user(0)]
        first = runtime.compose(runtime.request("pears", session_id="s", turn_index=0))
        runtime.deliver(first, history, PLAIN, call_index=0)
        second = runtime.compose(runtime.request("apples, then pears", session_id="s", turn_index=1))
        frame = {"role": "user", "content": "old frame", "metadata": {"contextplane_projection": True}}
        runtime.deliver(second, [frame, *history], PLAIN, call_index=0)
    a, b = cache_of(backend.snapshots.get("s", 0, 0)), cache_of(backend.snapshots.get("s", 1, 0))
    assert first.text and second.text and first.text != second.text
    assert (b.sha256, b.chars, b.shared) == (a.sha256, a.chars, a.chars) and b.unchanged


def test_after_a_restart_the_first_share_is_unknown(tmp_path: Path, host: PluginHost) -> None:
    """A new process opens the memory file anew: its backend has seen no call of the session."""
    path = tmp_path / "m.sqlite3"
    with (
        closing(SQLiteBackend(path, config=host.config)) as backend,
        open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime,
    ):
        history = run_session(runtime, 2)
    with closing(SQLiteBackend(path, config=host.config)) as backend:  # a new process
        with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
            turn = runtime.compose(runtime.request("q2", session_id="s", turn_index=2))
            runtime.deliver(turn, [*history, user(2)], PLAIN, call_index=0)
        cache = cache_of(backend.snapshots.get("s", 2, 0))
    assert cache.shared is None and not cache.first and not cache.unchanged
    assert "unknown" in cache.line()


def test_a_runtime_rebuilt_on_the_same_backend_names_the_changed_section(host: PluginHost) -> None:
    """An app that rebuilds its runtime (an edited SOUL.md, another tool set) over the backend it
    records into: the session's previous call is still known, so the section is named rather
    than the share reported unknown (the tracker is the backend's, ``tracker_of``)."""
    backend = InMemoryBackend()
    with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
        history = run_session(runtime, 2)
    changed = stable_prefix({**SECTIONS, "identity": "You are a terse assistant for the orchard team."})
    with open_runtime(backend=backend, host=host, prefix=changed) as runtime:
        turn = runtime.compose(runtime.request("q2", session_id="s", turn_index=2))
        runtime.deliver(turn, [*history, user(2)], PLAIN, call_index=0)
    cache = cache_of(backend.snapshots.get("s", 2, 0))
    assert cache.sections == ("identity",) and cache.shared is not None
    assert cache.line().endswith("broken by section 'identity'")
    assert tracker_of(backend) is tracker_of(backend) is not tracker_of(InMemoryBackend())


def test_incognito_calls_store_no_hash_but_their_figures(host: PluginHost) -> None:
    backend = InMemoryBackend()
    with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
        turn = runtime.compose(runtime.request("q0", session_id="s", turn_index=0, incognito=True))
        runtime.deliver(turn, [user(0)], PLAIN, call_index=0)
    cache = cache_of(backend.snapshots.get("s", 0, 0))
    assert cache.sha256 is None and cache.chars == len(PREFIX.text) + len(user(0)["content"])


# --- storage ----------------------------------------------------------------------------------

ROW = SnapshotRow(
    "s",
    0,
    0,
    1.9e9,
    "native",
    False,
    "h",
    "[]",
    None,
    "[]",
    None,
    0,
    1,
    10,
    "[]",
    "[]",
    None,
    "c" * 64,
    5010,
    4990,
    '{"sections":["tools"]}',
)
OLD_ROW = attrs.evolve(
    ROW,
    turn_index=1,
    cache_prefix_sha256=None,
    cache_prefix_chars=None,
    cache_shared_chars=None,
    cache_break=None,
)


def check_round_trip(store: Any) -> None:
    store.register_prefix("h", "the prefix", "[]")
    store.put(ROW)
    store.flush()
    got = store.get("s", 0, 0)
    assert got is not None and got.cache == CachePrefix("c" * 64, 5010, 4990, sections=("tools",))
    assert [s.cache for s in store.list("s") if s.key == ("s", 0, 0)] == [got.cache]


def test_the_figures_round_trip_in_memory() -> None:
    store = InMemoryBackend().snapshots
    check_round_trip(store)
    store.put(OLD_ROW)
    assert store.get("s", 1, 0).cache is None


def test_the_figures_round_trip_in_sqlite(tmp_path: Path) -> None:
    store = SQLiteSnapshotStore(tmp_path / "r.sqlite3")
    check_round_trip(store)
    store.close()
    again = SQLiteSnapshotStore(tmp_path / "r.sqlite3", read_only=True)
    assert cache_of(again.get("s", 0, 0)).sections == ("tools",)
    again.close()


#: The schema before the figures (what the old code path created).
OLD_SCHEMA = "\n".join(line for line in SCHEMA.splitlines() if not line.strip().startswith("cache_"))
OLD_INSERT = (
    "INSERT INTO prompt_snapshots VALUES "
    "('s', 1, 0, 1.9e9, 'native', 0, 'h', '[]', NULL, '[]', NULL, 0, 1, 10, '[]', '[]', NULL)"
)


def old_file(path: Path) -> Path:
    conn = apsw.Connection(str(path))
    conn.execute(OLD_SCHEMA)
    conn.execute("INSERT INTO prefix_texts VALUES ('h', 'the prefix', '[]', 1.9e9)")
    conn.execute(OLD_INSERT)
    conn.close()
    return path


def test_an_older_sqlite_file_opens_reads_and_writes(tmp_path: Path) -> None:
    path = old_file(tmp_path / "old.sqlite3")
    inspecting = SQLiteSnapshotStore(path, read_only=True)  # read-only: nothing is added
    assert inspecting.get("s", 1, 0) is not None and inspecting.get("s", 1, 0).cache is None
    inspecting.close()
    store = SQLiteSnapshotStore(path)
    old = store.get("s", 1, 0)
    assert old is not None and old.cache is None and old.history_chars == 10
    check_round_trip(store)
    assert [s.key for s in store.list("s")] == [("s", 0, 0), ("s", 1, 0)]
    store.close()


def test_rows_of_an_older_memory_file_are_adopted(tmp_path: Path) -> None:
    """Records an earlier version kept in the memory file itself (no figures) are copied."""
    legacy = old_file(tmp_path / "memory.sqlite3")
    store = SQLiteSnapshotStore(tmp_path / "memory.records.sqlite3", adopt_from=legacy)
    old = store.get("s", 1, 0)
    assert old is not None and old.cache is None
    check_round_trip(store)
    store.close()


def test_snapshots_command_prints_the_figure(tmp_path: Path, host: PluginHost) -> None:
    path = tmp_path / "m.sqlite3"
    backend = SQLiteBackend(path, config=host.config)
    try:
        with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
            history = run_session(runtime, 2)
            turn = runtime.compose(runtime.request("q2", session_id="s", turn_index=2))
            changed = stable_prefix({**SECTIONS, "rules": "Be brief."})
            runtime.deliver(turn, [*history, user(2)], PLAIN, call_index=0, prefix=changed)
    finally:
        backend.close()
    runner = CliRunner()
    listed = runner.invoke(snapshots, ["list", "--session", "s", "--db", str(path)])
    assert listed.exit_code == 0, listed.output
    cells = [line.split("  ")[-1].strip() for line in listed.output.splitlines()[2:]]
    assert cells[0].endswith("chars, the session's first call")
    assert cells[1].endswith("chars, unchanged since the previous call")
    assert cells[2].endswith("shared with the previous call; broken by section 'rules'")
    shown = runner.invoke(snapshots, ["show", "s", "1", "--db", str(path)])
    assert shown.exit_code == 0, shown.output
    assert (
        "== cacheable prefix: " in shown.output and "chars, unchanged since the previous call" in shown.output
    )


@pytest.mark.parametrize("shared", [None, 0])
def test_a_row_without_a_previous_call_says_so(shared: int | None) -> None:
    cache = CachePrefix.of_row("x", 10, shared, '{"unknown":true}' if shared is None else '{"first":true}')
    assert cache is not None and not cache.unchanged


def test_the_async_path_records_the_same_figures(host: PluginHost) -> None:
    async def session(runtime: Runtime) -> None:
        history: list[dict[str, Any]] = []
        for n in range(3):
            turn = await runtime.acompose(runtime.request(f"q{n}", session_id="s", turn_index=n))
            history.append(user(n))
            await runtime.adeliver(turn, history, PLAIN, call_index=0)
            history.append(assistant(n))

    sync, coro = InMemoryBackend(), InMemoryBackend()
    with open_runtime(backend=sync, host=host, prefix=PREFIX) as runtime:
        run_session(runtime, 3)
    with open_runtime(backend=coro, host=host, prefix=PREFIX) as runtime:
        asyncio.run(session(runtime))
    assert [s.cache for s in coro.snapshots.list("s")] == [s.cache for s in sync.snapshots.list("s")]
    assert all(s.cache is not None for s in coro.snapshots.list("s"))


def test_the_tracker_is_bounded_and_forgets_the_oldest_session() -> None:
    tracker = CacheTracker(max_sessions=2)

    def seen(session: str, first: bool = False) -> CachePrefix:
        return tracker.observe(
            session, first_call=first, prefix_text="p" * 100, prefix_sha="x", sections=(), messages=()
        )

    for session in ("a", "b", "c"):
        assert seen(session, first=True).first
    assert seen("c").unchanged and seen("b").unchanged
    forgotten = seen("a")  # evicted by "c": its share is unknown, not guessed
    assert forgotten.shared is None and not forgotten.unchanged


def test_the_langgraph_middleware_s_calls_share_their_prefix(
    host: PluginHost, backend: SQLiteBackend
) -> None:
    """Through the native surface: two turns of a tool-calling agent (a tool call, then the
    answer), four model calls; every call after the first reuses all of the previous one."""
    agent, _model, _saver, _mw = make_agent(host, backend=backend, stable_prefix=True)
    agent.invoke({"messages": [HumanMessage("lg:first question")]}, cfg("lg"))
    agent.invoke({"messages": [HumanMessage("lg:second question")]}, cfg("lg"))
    snaps = backend.snapshots.list("lg")
    assert [s.key[1:] for s in snaps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    caches = [cache_of(s) for s in snaps]
    assert caches[0].first
    for before, now in itertools.pairwise(caches):
        assert now.unchanged and now.shared == before.chars <= now.chars


# --- tool calls in the history digests ----------------------------------------------------------


def plain_tool_round(args: str, call_id: str, result_id: str) -> list[dict[str, Any]]:
    """An OpenAI-chat-shaped tool round: the call's text is empty, its arguments and ids are not."""
    return [
        user(0),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": args}}
            ],
        },
        {"role": "tool", "tool_call_id": result_id, "content": "found: pears are fine"},
    ]


def langchain_tool_round(args: str, call_id: str, result_id: str) -> list[Any]:
    return [
        HumanMessage("question 0: what about the pears?"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": args}, "id": call_id}]),
        ToolMessage("found: pears are fine", tool_call_id=result_id),
    ]


def langchain_codec() -> Any:
    return Callables(lambda text: HumanMessage(text), lambda _m: False, message_text, lambda m: str(m.type))


REWRITES = {
    # (what changes, the history message it is in): the text of every message stays the same.
    "a tool call's arguments": ({"args": '{"topic":"apples"}'}, 1),
    "a tool call's id": ({"call_id": "call-9", "result_id": "call-9"}, 1),
    "a tool result's id": ({"result_id": "call-9"}, 2),
}


@pytest.mark.parametrize("shape", ["plain", "langchain"])
@pytest.mark.parametrize("rewrite", list(REWRITES))
def test_a_rewrite_of_only_a_tool_call_breaks_the_share(
    tmp_path: Path, host: PluginHost, shape: str, rewrite: str
) -> None:
    """Issue 24: the history digests covered role and text only, so a history rewritten in a
    tool call's arguments or ids (not in any text) was recorded as fully shared. Both the
    in-process comparison and the stored hash must see it."""
    change, at = REWRITES[rewrite]
    build, codec = (
        (plain_tool_round, PLAIN) if shape == "plain" else (langchain_tool_round, langchain_codec())
    )
    base = {"args": '{"topic":"pears"}', "call_id": "call-1", "result_id": "call-1"}
    backend = SQLiteBackend(tmp_path / "m.sqlite3", config=host.config)
    try:
        with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
            for n, kwargs in enumerate([base, base, {**base, **change}]):
                history = build(**kwargs)
                turn = runtime.compose(runtime.request(f"q{n}", session_id="t", turn_index=n))
                runtime.deliver(turn, history, codec, call_index=0)
        same, rewritten = (cache_of(backend.snapshots.get("t", n, 0)) for n in (1, 2))
    finally:
        backend.close()
    assert same.unchanged and same.history_at is None
    assert rewritten.history_at == at and not rewritten.unchanged, rewritten
    assert rewritten.line().endswith(f"history rewritten at message {at}")
    assert rewritten.sha256 != same.sha256  # what is stored differs too
    assert rewritten.chars == same.chars  # the texts are the same: only the key moved


def test_the_tool_key_leaves_marks_out_and_is_canonical() -> None:
    a = {"role": "tool", "tool_call_id": "c1", "content": "x", "id": "m1", "metadata": {"seen": 1}}
    b = {"content": "y", "tool_call_id": "c1", "role": "tool", "metadata": {"seen": 2}}
    assert tool_key(a) == tool_key(b) == '{"tool_call_id":"c1"}'
    # A plain message and a LangChain one with the same role and text have the same digest.
    assert tool_key({"role": "user", "content": "hello"}) == tool_key(HumanMessage("hello")) == ""
