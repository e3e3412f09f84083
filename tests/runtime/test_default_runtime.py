"""ADR D8's ``compose_projected_context`` on the default runtime its store carries (issue 25).

Before, every D8 call resolved its store's backend again (``_resolve`` -> ``resolve_backend`` ->
``backend_of``, an ``id()``-keyed registry among its maps), so a turn on the D8 path walked the
backend registry that the runtime path had already left. These tests hold the D8 path to one
resolution per store, a runtime per store that no other store shares (not even an equal copy),
the records in each store's own backend, and no registry consulted after the first turn.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

import contextplane
import contextplane.runtime
from contextplane import PluginHost
from contextplane.aprojection import acompose_projected_context
from contextplane.backends.memory import InMemoryBackend
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.default_runtime import ATTRIBUTE, KEEP, default_runtime
from contextplane.delivery import deliver, plain_projection_message
from contextplane.projection import compose_projected_context
from contextplane.records import backend as records_backend
from contextplane.store.sqlite import SQLiteKnowledgeStore

from .test_runtime import Refusing, RefusingList


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every call of the backend resolver, wherever the D8 path could call it."""
    calls: list[object] = []
    real = contextplane.backends.resolve_backend

    def counting(store: object, config: Any) -> Any:
        calls.append(store)
        return real(store, config)  # type: ignore[arg-type]

    monkeypatch.setattr(contextplane.projection, "resolve_backend", counting)
    monkeypatch.setattr(contextplane.runtime, "resolve_backend", counting)
    return calls


def runtimes_of(store: object) -> list[Any]:
    return [entry[-1] for entry in vars(store).get(ATTRIBUTE, ())]


def test_the_public_names_are_the_default_runtime_s() -> None:
    assert contextplane.compose_projected_context is compose_projected_context
    assert compose_projected_context.__module__ == "contextplane.default_runtime"


def test_n_d8_turns_resolve_the_store_s_backend_once(host: PluginHost, resolutions: list[object]) -> None:
    backend = InMemoryBackend()
    store = backend.memories
    for n in range(5):
        compose_projected_context(f"q{n}", store, session_id="s", turn_index=n, host=host)
    assert resolutions == [store]  # was one per turn
    (runtime,) = runtimes_of(store)
    assert runtime.backend is backend
    assert [r.turn_index for r in backend.injections.rows("s")] == [0, 1, 2, 3, 4]


def test_after_the_first_turn_no_registry_is_consulted(
    host: PluginHost, backend: SQLiteBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.memories
    compose_projected_context("q0", store, session_id="s", turn_index=0, host=host)
    monkeypatch.setattr(records_backend, "_owners", Refusing())
    monkeypatch.setattr(records_backend, "_unhashable", RefusingList())
    for n in (1, 2):
        projection = compose_projected_context(f"q{n}", store, session_id="s", turn_index=n, host=host)
        deliver(projection, [], prefix="P", call_index=0, wrap=plain_projection_message, host=host)
    assert [r.turn_index for r in backend.injections.rows("s")] == [0, 1, 2]
    assert [s.key for s in backend.snapshots.list("s")] == [("s", 1, 0), ("s", 2, 0)]


def test_two_stores_never_share_a_runtime_and_each_keeps_its_own_records(
    tmp_path: Path, host: PluginHost, resolutions: list[object]
) -> None:
    """Two bare embedded stores (no backend opened by the caller): each gets a backend around
    it, once, and the records of its turns land in its own file."""
    config = structure({"context": {"context_window": 200_000}})
    a = SQLiteKnowledgeStore(tmp_path / "a.sqlite3")
    b = SQLiteKnowledgeStore(tmp_path / "b.sqlite3")
    try:
        for n in range(3):  # interleaved, the same session and turn on both
            compose_projected_context("alpha", a, session_id="s", turn_index=n, host=host, config=config)
            compose_projected_context("beta", b, session_id="s", turn_index=n, host=host, config=config)
        assert resolutions == [a, b]
        (ra,), (rb,) = runtimes_of(a), runtimes_of(b)
        assert ra is not rb and ra.backend is not rb.backend
        assert ra.backend.memories is a and rb.backend.memories is b
        for store, query in ((a, "alpha"), (b, "beta")):
            reopened = SQLiteBackend(store.path, config=config)  # what is in the file
            try:
                assert [r.turn_index for r in reopened.injections.rows("s")] == [0, 1, 2]
                inputs = [reopened.snapshots.get_inputs("s", n) for n in range(3)]
                assert [i.query if i else None for i in inputs] == [query] * 3
            finally:
                reopened.close()
    finally:
        for store in (a, b):
            for runtime in runtimes_of(store):
                runtime.backend.close()
            store.close()


def test_an_equal_copy_of_a_store_wires_a_runtime_of_its_own(host: PluginHost) -> None:
    backend = InMemoryBackend()
    store = backend.memories
    compose_projected_context("q", store, session_id="s", host=host)
    twin = copy.copy(store)  # carries the original's attribute: the runtime must not be taken
    compose_projected_context("q", twin, session_id="t", host=host)
    (mine,) = runtimes_of(store)
    assert [r.given_store for r in runtimes_of(twin)] == [store, twin]
    assert runtimes_of(twin)[-1] is not mine
    assert runtimes_of(store) == [mine]  # the copy's runtime was not hung on the original


def test_a_store_keeps_one_runtime_per_host_and_strict_mode_at_most_keep(host: PluginHost) -> None:
    backend = InMemoryBackend()
    store = backend.memories
    config = host.config
    first = default_runtime(store, None, host, config, None)
    assert default_runtime(store, None, host, config, None) is first
    assert default_runtime(store, None, host, config, True) is not first
    for _ in range(KEEP + 2):
        default_runtime(store, None, PluginHost(config), config, None)
    assert len(runtimes_of(store)) == KEEP


def test_a_store_that_cannot_carry_its_runtime_still_composes_and_records(host: PluginHost) -> None:
    backend = InMemoryBackend()

    class Slotted:
        """A store that delegates to the in-memory one and has no ``__dict__``."""

        __slots__ = ("backend",)

        def __init__(self) -> None:
            self.backend = backend

        def __getattr__(self, name: str) -> Any:
            return getattr(backend.memories, name)

    store = Slotted()
    assert default_runtime(store, None, host, host.config, None) is None
    compose_projected_context("q", store, session_id="s", host=host)
    assert len(backend.injections.rows("s")) == 1


def test_no_store_and_no_backend_composes_directly(host: PluginHost) -> None:
    projection = compose_projected_context("q", host=host, record=False)
    assert "MARK{" in projection.text


def test_the_async_d8_turns_run_on_the_same_runtime_with_the_same_bytes(
    host: PluginHost, resolutions: list[object]
) -> None:
    backend = InMemoryBackend()
    store = backend.memories
    texts = []
    for n in range(3):
        sync = compose_projected_context(f"q{n}", store, session_id="s", turn_index=n, host=host)
        loop = asyncio.run(
            acompose_projected_context(f"q{n}", store, session_id="a", turn_index=n, host=host)
        )
        texts.append((sync.text.replace("{s|", "{a|"), loop.text))  # the markers name the session
    assert resolutions == [store]
    assert len(runtimes_of(store)) == 1
    assert all(a == b for a, b in texts)
    assert len(backend.injections.rows("s")) == len(backend.injections.rows("a")) == 3
