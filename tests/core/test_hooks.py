"""Every hook: a documented heading in docs/hooks.md and a test_hook_<name> test (datasette's rule)."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

from contextplane import (
    ContextSection,
    Envelope,
    PromptSection,
    Row,
    Shed,
    build_stable_prefix,
    compose_projected_context,
    deliver,
    hookimpl,
    hookspecs,
)
from contextplane.delivery import plain_projection_message
from contextplane.testing.memory import InMemoryBackend, InMemoryKnowledgeStore

from .helpers import host_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"
SPECS = {
    name: fn
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
    if hasattr(fn, "contextplane_spec")
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_hook_is_documented_with_its_signature(name: str) -> None:
    args = ", ".join(inspect.signature(SPECS[name]).parameters)
    assert f"## {name}({args})" in DOCS.read_text(), f"docs/hooks.md needs a heading '## {name}({args})'"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_hook_has_a_test(name: str) -> None:
    tests_dir = Path(__file__).resolve().parents[1]
    found = any(re.search(rf"def test_hook_{name}\b", p.read_text()) for p in tests_dir.rglob("test_*.py"))
    assert found, f"add a test named test_hook_{name}"


def test_no_documented_hook_is_missing_from_the_specs() -> None:
    documented = set(re.findall(r"^## (\w+)\(", DOCS.read_text(), flags=re.M))
    assert documented == set(SPECS)


class FakeEmbedder:
    dimensions = 3
    name = "fake-3"

    def embed(self, texts):
        return [[float(len(t)), 1.0, 0.0] for t in texts]


STORE = InMemoryKnowledgeStore()
EMBEDDER = FakeEmbedder()


class Plugin:
    plugin_name = "hooks_plugin"

    def __init__(self) -> None:
        self.projections: list = []
        self.prefixes: list = []
        self.calls: list = []

    @hookimpl
    def register_prompt_sections(self, register, config):
        assert config is not None
        register(PromptSection("identity", lambda ctx: "I am a test agent.", authority=10))

    @hookimpl
    def register_context_sections(self, register):
        register(
            ContextSection(
                "notes",
                30,
                Shed.DROP_ROWS,
                lambda req: [Row("n1", 1, f"about {req.query}")],
                Envelope("notes"),
            )
        )

    @hookimpl
    def knowledge_store(self, config):
        assert config.source == "defaults"
        return STORE

    @hookimpl
    def embedder(self):
        return EMBEDDER

    @hookimpl
    def observe_projection(self, projection, request):
        self.projections.append((projection.delivered_ids, request.session_id))

    @hookimpl
    def observe_model_call(self, call, request):
        self.calls.append((call.call_index, call.history_messages, call.projection.text, request.session_id))

    @hookimpl
    def observe_stable_prefix(self, prefix):
        self.prefixes.append(prefix.order)


def test_hook_register_prompt_sections() -> None:
    assert build_stable_prefix(host_of(Plugin())).text == "I am a test agent."


def test_hook_register_context_sections() -> None:
    p = compose_projected_context("deploys", host=host_of(Plugin()), budget_tokens=0)
    assert p.text == "<notes>\n- about deploys\n</notes>"


def test_hook_knowledge_store() -> None:
    class Passes:
        plugin_name = "a_passes"

        @hookimpl
        def knowledge_store(self):
            return None

    class Broken:
        plugin_name = "0_broken"

        @hookimpl
        def knowledge_store(self):
            raise RuntimeError("no dsn")

    host = host_of(Passes(), Broken(), Plugin())
    assert host.knowledge_store() is STORE
    assert [f.describe() for f in host.failures] == [
        "plugin '0_broken' failed during knowledge_store: RuntimeError: no dsn"
    ]


def test_knowledge_store_that_is_not_a_store_is_recorded_and_skipped() -> None:
    class DictStore:
        plugin_name = "0_dict_store"

        @hookimpl
        def knowledge_store(self):
            return {"not": "a store"}

    host = host_of(DictStore(), Plugin())
    assert host.knowledge_store() is STORE  # the next plugin is asked
    (failure,) = host.failures
    assert failure.describe() == (
        "plugin '0_dict_store' failed during knowledge_store: returned dict, which is not a KnowledgeStore: "
        "missing add_chunk, add_chunks, close, invalidate_chunk, list_chunks, purge, search, "
        "set_expires_at, set_review_state, supersede; return one, or None to let another plugin decide"
    )


def test_hook_embedder() -> None:
    assert host_of(Plugin()).embedder() is EMBEDDER
    assert host_of().embedder() is None

    class Stringy:
        plugin_name = "stringy"

        @hookimpl
        def embedder(self):
            return "an-embedder"

    host = host_of(Stringy())
    assert host.embedder() is None
    assert host.failures[0].error.startswith(
        "returned str, which is not an Embedder: missing dimensions, embed"
    )


def test_hook_backend() -> None:
    backend = InMemoryBackend()

    class Chooses:
        plugin_name = "chooses"

        @hookimpl
        def backend(self, config):
            return backend

    class Half:
        plugin_name = "0_half"

        @hookimpl
        def backend(self):
            return InMemoryKnowledgeStore()  # a store is not a backend

    host = host_of(Half(), Chooses())
    assert host.backend() is backend
    assert (
        host.failures[0]
        .describe()
        .startswith(
            "plugin '0_half' failed during backend: returned InMemoryKnowledgeStore, which is not a contextplane "
            "Backend: it has no 'name'"
        )
    )
    assert host_of().backend() is None


def test_hook_observe_model_call() -> None:
    plugin = Plugin()
    host = host_of(plugin)
    p = compose_projected_context("x", host=host, budget_tokens=0, session_id="s9", backend=InMemoryBackend())
    history = [{"role": "user", "content": "x"}, {"role": "user", "content": "old", "context_frame": True}]
    out = deliver(p, history, prefix="sys", call_index=2, wrap=plain_projection_message, host=host)
    assert plugin.calls == [(2, 1, p.text, "s9")]
    assert [m["content"] for m in out.messages] == ["x", p.text]
    assert out.stripped == (history[1],)
    preview = compose_projected_context("x", host=host, budget_tokens=0, record=False)
    deliver(preview, [], prefix=None, call_index=0, wrap=plain_projection_message, host=host)
    assert len(plugin.calls) == 1  # a preview is delivered, never recorded


def test_hook_observe_projection() -> None:
    plugin = Plugin()
    compose_projected_context("x", host=host_of(plugin), budget_tokens=0, session_id="s9")
    assert plugin.projections == [({"notes": ("n1",)}, "s9")]


def test_hook_observe_stable_prefix() -> None:
    plugin = Plugin()
    build_stable_prefix(host_of(plugin))
    assert plugin.prefixes == [("identity",)]


def test_failing_observer_does_not_take_down_the_turn() -> None:
    class BadObserver:
        plugin_name = "bad_observer"

        @hookimpl
        def observe_projection(self, projection):
            raise OSError("disk full")

    host = host_of(Plugin(), BadObserver())
    p = compose_projected_context("x", host=host, budget_tokens=0)
    assert p.delivered_ids == {"notes": ("n1",)}
    assert (
        host.failures[-1].describe()
        == "plugin 'bad_observer' failed during observe_projection: OSError: disk full"
    )


def test_unknown_hook_name_is_rejected_with_a_suggestion() -> None:
    class Typo:
        plugin_name = "typo"

        @hookimpl
        def register_context_section(self, register):  # missing 's'
            pass

    host = host_of(Typo())
    assert not host.pm.has_plugin("typo")
    assert host.failures[0].describe() == (
        "plugin 'typo' failed during validation: register_context_section implements unknown hook "
        "'register_context_section'; did you mean 'register_context_sections'?"
    )


def test_wrong_signature_is_rejected_and_leaves_nothing_registered() -> None:
    class Wrong:
        plugin_name = "wrong"

        @hookimpl
        def register_context_sections(self, register, tenant):
            pass

    host = host_of(Wrong(), Plugin())
    assert not host.pm.has_plugin("wrong")
    assert "tenant" in host.failures[0].error
    assert compose_projected_context("q", host=host, budget_tokens=0).delivered_ids == {"notes": ("n1",)}
    assert sys.modules[__name__]  # the test module itself is intact


def test_register_with_a_non_section_is_recorded() -> None:
    class Sloppy:
        plugin_name = "sloppy"

        @hookimpl
        def register_context_sections(self, register):
            register({"name": "dict-section"})

    host = host_of(Sloppy(), Plugin())
    assert [r.section.name for r in host.context_sections()] == ["notes"]
    assert host.failures[0].describe() == (
        "plugin 'sloppy' failed during register_context_sections: TypeError: plugin 'sloppy' passed dict "
        "to register(); expected contextplane.ContextSection"
    )
