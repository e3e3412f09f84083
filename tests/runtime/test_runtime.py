"""The runtime (issue 25, step 1): a deployment wired once, a turn handed from composition to
its model calls.

Before it, every composition resolved its backend again (``_resolve`` -> ``resolve_backend``),
and the record of a turn was parked in ``observer._turns[id(projection)]`` between
composition and each model call, beside the recorders in ``observer._recorders`` and the
store owners in ``records.backend._owners``. These tests hold the runtime to: one resolution
for any number of turns, records written through the ``Turn`` with every such registry
refusing to be read, two runtimes in one process never crossing their records, the sync and
async paths giving the same bytes, incognito recording no text, and one ``MessageCodec`` in
place of ``deliver``'s four callables.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import contextplane.backends
import contextplane.projection
import contextplane.runtime
from contextplane import PluginHost
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.delivery import PLAIN, deliver, plain_projection_message
from contextplane.errors import ContextPlaneError, ValidationError
from contextplane.observability import observer
from contextplane.records import backend as records_backend
from contextplane.runtime import Runtime, Turn, open_runtime
from contextplane.testing.memory import InMemoryBackend
from contextplane_langgraph import ContextPlaneMiddleware

from .conftest import MARK, MEMTEXT
from .fakes import RecordingChatModel


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every call of the backend resolver, wherever composition or the runtime calls it."""
    calls: list[object] = []
    real = contextplane.backends.resolve_backend

    def counting(store: object, config: Any) -> Any:
        calls.append(store)
        return real(store, config)  # type: ignore[arg-type]

    monkeypatch.setattr(contextplane.projection, "resolve_backend", counting)
    monkeypatch.setattr(contextplane.runtime, "resolve_backend", counting)
    return calls


def test_a_runtime_composes_n_turns_on_one_resolution(host: PluginHost, resolutions: list[object]) -> None:
    backend = InMemoryBackend()
    runtime = Runtime(host=host, knowledge_store=backend.memories)  # the store's backend is resolved
    for n in range(5):
        runtime.compose(runtime.request(f"q{n}", session_id="s", turn_index=n))
    assert resolutions == [backend.memories]
    assert runtime.backend is backend
    assert [r.turn_index for r in backend.injections.rows("s")] == [0, 1, 2, 3, 4]


def test_a_runtime_given_its_backend_never_resolves(host: PluginHost, resolutions: list[object]) -> None:
    backend = InMemoryBackend()
    with open_runtime(backend=backend, host=host) as runtime:
        for n in range(3):
            asyncio.run(runtime.acompose(runtime.request(f"q{n}", session_id="s", turn_index=n)))
            runtime.compose(runtime.request(f"q{n}", session_id="t", turn_index=n))
    assert resolutions == []


def test_the_middleware_resolves_the_store_s_backend_once_for_all_its_turns(
    host: PluginHost, resolutions: list[object]
) -> None:
    """Before the runtime the middleware resolved its store's backend on every turn."""
    backend = InMemoryBackend()
    model = RecordingChatModel(policy=lambda _m: AIMessage("ok"))
    mw = ContextPlaneMiddleware(host=host, knowledge_store=backend.memories)
    agent = create_agent(model=model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    for n in range(3):
        agent.invoke({"messages": [HumanMessage(f"q{n}")]}, {"configurable": {"thread_id": "mw"}})
    assert len(model.calls) == 3
    assert resolutions == [backend.memories]
    assert [r.turn_index for r in backend.injections.rows("mw")] == [0, 1, 2]
    assert [s.key for s in backend.snapshots.list("mw")] == [("mw", n, 0) for n in range(3)]


class Refusing(dict[Any, Any]):
    """A registry that fails the test when anything reads or writes it."""

    def _refuse(self, *_a: object, **_k: object) -> Any:
        raise AssertionError("an id()-keyed registry was consulted on the runtime path")

    get = __getitem__ = __setitem__ = __contains__ = setdefault = pop = _refuse  # type: ignore[assignment]


class RefusingList(list[Any]):
    """The identity-found fallback list, failing the test when anything reads or writes it."""

    def _refuse(self, *_a: object, **_k: object) -> Any:
        raise AssertionError("a process-wide registry was consulted on the runtime path")

    __iter__ = __getitem__ = __setitem__ = __contains__ = append = _refuse  # type: ignore[assignment]


@pytest.fixture
def no_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process-wide registries a turn's records used to be found through, made to refuse."""
    monkeypatch.setattr(observer, "_recorders", Refusing())
    monkeypatch.setattr(observer, "_unhashable", RefusingList())
    monkeypatch.setattr(records_backend, "_owners", Refusing())
    monkeypatch.setattr(records_backend, "_unhashable", RefusingList())


def test_compose_then_deliver_records_through_the_turn_and_no_registry(
    host: PluginHost, backend: SQLiteBackend, no_registries: None
) -> None:
    runtime = Runtime(host=host, backend=backend, prefix="SYSTEM PREFIX")
    turns = [runtime.compose(runtime.request(f"q{n}", session_id="s", turn_index=n)) for n in range(3)]
    for turn in turns:  # every turn composed first, then each delivered to two calls
        for call in range(2):
            delivered = runtime.deliver(turn, [{"role": "user", "content": "hi"}], PLAIN, call_index=call)
            assert delivered.messages[-1]["content"] == turn.text
    rows = backend.injections.rows("s")
    assert [r.turn_index for r in rows] == [0, 1, 2]
    snaps = backend.snapshots.list("s")
    assert [s.key for s in snaps] == [("s", t, c) for t in range(3) for c in range(2)]
    for snap in snaps:
        assert snap.projection_sha256 == sha(turns[snap.turn_index].text)
        assert snap.prefix_sha256 == sha("SYSTEM PREFIX")
    assert {t.projection.record_status for t in turns} == {"recorded"}
    inputs = [backend.snapshots.get_inputs("s", n) for n in range(3)]  # what explain and replay read
    assert [i.query if i else None for i in inputs] == ["q0", "q1", "q2"]


def test_the_turn_is_all_that_holds_its_projection_and_its_record_state(
    host: PluginHost, backend: SQLiteBackend, no_registries: None
) -> None:
    """The record state lives on the turn, not in a registry: a turn the caller holds nothing
    but the handle of records right, and once the handle goes the projection goes with it
    (nothing parked it anywhere, and no reference cycle keeps it for the collector)."""
    runtime = Runtime(host=host, backend=backend)
    turn: Turn | None = runtime.compose(runtime.request("q", session_id="s", turn_index=1))
    assert turn is not None
    probe = weakref.ref(turn.projection)
    text = turn.text
    runtime.deliver(turn, [], PLAIN, call_index=0)
    turn = None
    assert probe() is None  # the turn was the last holder: nothing kept it alive
    (snap,) = backend.snapshots.list("s")
    assert snap.projection_sha256 == sha(text)


def test_two_runtimes_in_one_process_never_cross_their_records(host: PluginHost) -> None:
    a, b = InMemoryBackend(), InMemoryBackend()
    ra = Runtime(host=host, backend=a, prefix="PREFIX A")
    rb = Runtime(host=host, backend=b, prefix="PREFIX B")
    # The same session and turn on both, interleaved: composed A, B; delivered B, A.
    ta = ra.compose(ra.request("alpha", session_id="s", turn_index=1))
    tb = rb.compose(rb.request("beta", session_id="s", turn_index=1))
    rb.deliver(tb, [], call_index=0)
    ra.deliver(ta, [], call_index=0)
    asyncio.run(ra.adeliver(ta, [], call_index=1))
    (sa0, sa1), (sb,) = a.snapshots.list("s"), b.snapshots.list("s")
    assert {sa0.projection_sha256, sa1.projection_sha256} == {sha(ta.text)}
    assert sb.projection_sha256 == sha(tb.text) != sha(ta.text)
    assert {sa0.prefix_sha256, sa1.prefix_sha256} == {sha("PREFIX A")}
    assert sb.prefix_sha256 == sha("PREFIX B")
    assert len(a.injections.rows("s")) == len(b.injections.rows("s")) == 1


def _records(backend: InMemoryBackend) -> list[tuple[Any, ...]]:
    """What a turn left in a backend, without the timestamps."""
    injections = [(r.session_id, r.turn_index, r.mode, dict(r.delivered)) for r in backend.injections.rows()]
    snaps = [
        (s.key, s.projection_sha256, s.prefix_sha256, s.sections, s.history_chars, s.full_text)
        for s in backend.snapshots.list()
    ]
    return [*injections, *snaps]


def test_sync_and_async_turns_give_the_same_bytes_and_records() -> None:
    from contextplane import plugin_host_with

    from .conftest import InjectionLog, MarkerSections

    cfg = structure({"context": {"context_window": 200_000, "capture_full_text": True}})
    host = plugin_host_with([MarkerSections(), InjectionLog()], cfg)
    history = [{"role": "user", "content": "hello"}, {"role": "user", "content": "x", "context_frame": True}]
    sync_b, async_b = InMemoryBackend(), InMemoryBackend()
    rs, ra = Runtime(host=host, backend=sync_b, prefix="P"), Runtime(host=host, backend=async_b, prefix="P")
    ts = rs.compose(rs.request("q", session_id="s", turn_index=2, state={"goal": "ship"}))
    ds = rs.deliver(ts, history, call_index=0)

    async def turn() -> tuple[Turn, Any]:
        t = await ra.acompose(ra.request("q", session_id="s", turn_index=2, state={"goal": "ship"}))
        return t, await ra.adeliver(t, history, call_index=0)

    ta, da = asyncio.run(turn())
    assert MARK in ts.text and ts.text.encode() == ta.text.encode()
    assert ds.messages == da.messages and ds.call.full_text() == da.call.full_text()
    assert _records(sync_b) == _records(async_b) and len(_records(sync_b)) == 2


def test_an_incognito_turn_records_no_text_and_no_injection_row(host: PluginHost, tmp_path: Path) -> None:
    backend = InMemoryBackend()
    runtime = Runtime(host=host, backend=backend)
    for compose in ("sync", "async"):
        request = runtime.request("secret", session_id=compose, turn_index=1, incognito=True)
        turn = runtime.compose(request) if compose == "sync" else asyncio.run(runtime.acompose(request))
        assert MEMTEXT not in turn.text and turn.projection.injection is None
        runtime.deliver(turn, [], call_index=0)
        assert turn.projection.record_status == "not recorded"
        assert backend.injections.rows(compose) == []
        (snap,) = backend.snapshots.list(compose)  # references and sizes only, flagged
        assert snap.incognito and snap.projection_sha256 is None and snap.full_text is None


class TupleCodec:
    """Messages as (role, text, is_frame) tuples: a message type delivery knows nothing of."""

    def is_frame(self, message: tuple[str, str, bool]) -> bool:
        return message[2]

    def text_of(self, message: tuple[str, str, bool]) -> str:
        return message[1]

    def role_of(self, message: tuple[str, str, bool]) -> str:
        return message[0]

    def wrap(self, text: str) -> tuple[str, str, bool]:
        return ("user", text, True)


def test_one_codec_strips_frames_places_the_projection_and_reads_the_messages(host: PluginHost) -> None:
    cfg = structure({"context": {"context_window": 200_000, "capture_full_text": True}})
    backend = InMemoryBackend()
    runtime = Runtime(host=host, config=cfg, backend=backend, prefix="SYS")
    turn = runtime.compose(runtime.request("q", session_id="c", turn_index=1))
    history = [("user", "hello", False), ("user", "OLD FRAME", True), ("assistant", "hi", False)]
    delivered = runtime.deliver(turn, history, TupleCodec(), call_index=0)
    assert delivered.messages == [history[0], history[2], ("user", turn.text, True)]
    assert delivered.stripped == (history[1],)
    assert delivered.call.history_chars == len("hello") + len("hi")
    (snap,) = backend.snapshots.list("c")
    assert snap.full_text is not None and snap.full_text.startswith(
        "[system]\nSYS\n\n[user]\nhello\n\n[assistant]\nhi"
    )


def test_deliver_with_four_callables_still_delivers_as_before(host: PluginHost) -> None:
    """The older ``deliver`` signature is a codec too: same messages as ``Runtime.deliver``."""
    backend = InMemoryBackend()
    runtime = Runtime(host=host, backend=backend)
    turn = runtime.compose(runtime.request("q", session_id="d", turn_index=1))
    history = [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "f", "metadata": {"context_frame": 1}},
    ]
    old = deliver(
        turn.projection, history, prefix=None, call_index=0, wrap=plain_projection_message, host=host
    )
    new = runtime.deliver(turn, history, call_index=1, prefix=None)
    assert old.messages == new.messages and old.stripped == new.stripped
    assert [s.key for s in backend.snapshots.list("d")] == [("d", 1, 0), ("d", 1, 1)]


def test_open_runtime_opens_and_closes_the_deployment_s_backend_and_builds_the_prefix_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextplane import plugin_host_with

    from .conftest import MarkerSections

    db = tmp_path / "deploy.sqlite3"
    host = plugin_host_with([MarkerSections()], structure({"store": {"path": str(db)}}))
    closed: list[object] = []
    real_close = SQLiteBackend.close

    def close(self: SQLiteBackend) -> None:
        closed.append(self)
        real_close(self)

    builds: list[object] = []
    real_build = contextplane.runtime.build_stable_prefix

    def build(host: PluginHost, ctx: Any) -> Any:
        builds.append(ctx)
        return real_build(host, ctx)

    monkeypatch.setattr(SQLiteBackend, "close", close)
    monkeypatch.setattr(contextplane.runtime, "build_stable_prefix", build)
    with open_runtime(host=host, tools=("search",)) as runtime:
        opened = runtime.backend
        assert isinstance(opened, SQLiteBackend) and db.exists()
        for n in range(2):
            turn = runtime.compose(runtime.request("q", session_id="o", turn_index=n))
            runtime.deliver(turn, [], call_index=0)
        prefix = runtime.prefix
        assert prefix is not None and not isinstance(prefix, str) and "PREFIX-IDENTITY" in prefix.text
        assert [r.turn_index for r in opened.injections.rows("o")] == [0, 1]
        assert {s.prefix_sha256 for s in opened.snapshots.list("o")} == {prefix.sha256}
    assert closed == [opened]
    assert len(builds) == 1 and builds[0].tools == ("search",)  # type: ignore[attr-defined]
    given = SQLiteBackend(tmp_path / "given.sqlite3")
    with open_runtime(host=host, backend=given) as runtime:
        runtime.compose(runtime.request("q", session_id="g"))
    assert closed == [opened]  # a backend handed in stays its owner's to close
    given.close()


def test_bad_input_to_a_runtime_is_named_in_one_line(host: PluginHost) -> None:
    backend = InMemoryBackend()
    runtime = Runtime(host=host, backend=backend)
    with pytest.raises(ValidationError, match=r"takes a ProjectionRequest .*runtime\.request.*got str"):
        runtime.compose("what is the deploy window?")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"takes a ProjectionRequest .*got dict"):
        asyncio.run(runtime.acompose({"query": "q"}))  # type: ignore[arg-type]
    turn = runtime.compose(runtime.request("q", session_id="b"))
    with pytest.raises(ValidationError, match=r"takes the Turn runtime\.compose returned .*got str"):
        runtime.deliver(turn.text, [], call_index=0)  # type: ignore[arg-type]
    runtime.close()
    for late in (
        lambda: runtime.compose(runtime.request("q")),
        lambda: runtime.deliver(turn, [], call_index=0),
    ):
        with pytest.raises(ContextPlaneError, match=r"Runtime is closed .*open_runtime"):
            late()
    assert backend.snapshots.list("b") == []  # nothing was delivered, so nothing recorded


class _NoInputs:
    """A snapshot store that keeps snapshots but no turn inputs (no ``put_inputs``)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        self._inner.register_prefix(sha256, text, sections_json)

    def put(self, row: Any) -> None:
        self._inner.put(row)

    def flush(self) -> None:
        self._inner.flush()

    def prefix_text(self, sha256: str) -> str | None:
        return self._inner.prefix_text(sha256)  # type: ignore[no-any-return]

    def count(self, session_id: str | None = None) -> int:
        return self._inner.count(session_id)  # type: ignore[no-any-return]

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.list(*args, **kwargs)

    def get(self, session_id: str, turn_index: int, call_index: int = 0) -> Any:
        return self._inner.get(session_id, turn_index, call_index)

    def sessions(self) -> Any:
        return self._inner.sessions()

    def prune(self, now: float | None = None) -> int:
        return self._inner.prune(now)  # type: ignore[no-any-return]


class _BackendWithoutInputs:
    """The in-memory backend with a snapshot store that keeps no turn inputs."""

    name = "no-inputs"

    def __init__(self) -> None:
        self.inner = InMemoryBackend()
        self.snapshots = _NoInputs(self.inner.snapshots)
        self.memories = self.inner.memories
        self.summaries = self.inner.summaries
        self.injections = self.inner.injections
        self.trajectory = None

    def close(self) -> None:
        self.inner.close()


def test_a_runtime_asks_its_backend_once_whether_it_keeps_turn_inputs(
    host: PluginHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whether turn inputs are kept is a fact of the backend: asked once per runtime, not per
    turn (the records observer asked ``backend.snapshots`` on every turn), and a backend that
    keeps none is said once, while its injection rows and snapshots are still recorded."""
    asked: list[object] = []
    real = contextplane.runtime.keeps_inputs

    def counting(backend: Any) -> bool:
        asked.append(backend)
        return real(backend)

    monkeypatch.setattr(contextplane.runtime, "keeps_inputs", counting)
    backend = _BackendWithoutInputs()
    runtime = Runtime(host=host, backend=backend, prefix="P")  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="contextplane.records"):
        for n in range(4):
            turn = runtime.compose(runtime.request(f"q{n}", session_id="s", turn_index=n))
            runtime.deliver(turn, [{"role": "user", "content": "hi"}], PLAIN, call_index=0)
    assert asked == [backend]
    said = [r for r in caplog.records if "keeps no turn inputs" in r.getMessage()]
    assert len(said) <= 1  # once per process (an earlier test may have said it already)
    assert [r.turn_index for r in backend.injections.rows("s")] == [0, 1, 2, 3]
    assert [s.key for s in backend.snapshots.list("s")] == [("s", n, 0) for n in range(4)]
    assert turn.projection.record_status == "recorded"


def test_a_backend_that_keeps_no_turn_inputs_is_said_once_and_records_the_rest(
    host: PluginHost, caplog: pytest.LogCaptureFixture
) -> None:
    from contextplane.notices import reset_notices

    reset_notices()
    backend = _BackendWithoutInputs()
    runtime = Runtime(host=host, backend=backend, prefix="P")  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="contextplane.records"):
        for n in range(3):
            runtime.compose(runtime.request(f"q{n}", session_id="t", turn_index=n))
    said = [r for r in caplog.records if "keeps no turn inputs" in r.getMessage()]
    assert len(said) == 1 and "_NoInputs" in said[0].getMessage()
    assert [r.turn_index for r in backend.injections.rows("t")] == [0, 1, 2]
