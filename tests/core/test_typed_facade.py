"""The hook specs and the plugin host's facade name real types, not ``Any``.

Why: pluggy's calls are untyped, so the facade is the one place a plugin's result gets a type
before the core uses it (STYLE.md, "Calls are untyped"). With the turn's value types in
``contextplane.types`` (importing no behaviour) the specs and the facade can name them without an
import cycle; an ``Any`` creeping back hides a plugin that returns the wrong thing from mypy.
The hints are resolved at run time (``typing.get_type_hints``), so a name that is only imported
for the type checker would fail here too.
"""

from __future__ import annotations

import typing

import pytest

from contextplane import hookspecs
from contextplane.embedding import Embedder
from contextplane.plugins import PluginHost
from contextplane.records.backend import Backend
from contextplane.store.protocol import KnowledgeStore
from contextplane.types import ModelCall, ProjectedContext, StablePrefix

SPECS = sorted(name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "contextplane_spec"))
FACADE = (
    "backend",
    "knowledge_store",
    "embedder",
    "notify_projection",
    "notify_model_call",
    "anotify_projection",
    "anotify_model_call",
    "notify_stable_prefix",
)


def _mentions_any(hint: object) -> bool:
    return hint is typing.Any or any(_mentions_any(arg) for arg in typing.get_args(hint))


@pytest.mark.parametrize("name", SPECS)
def test_every_hook_spec_is_typed_without_any(name: str) -> None:
    hints = typing.get_type_hints(getattr(hookspecs, name))
    loose = sorted(arg for arg, hint in hints.items() if _mentions_any(hint))
    assert not loose, f"hook spec {name} types {loose} as Any; name the type it takes or returns"


@pytest.mark.parametrize("name", FACADE)
def test_the_host_facade_is_typed_without_any(name: str) -> None:
    hints = typing.get_type_hints(getattr(PluginHost, name))
    loose = sorted(arg for arg, hint in hints.items() if _mentions_any(hint))
    assert not loose, f"PluginHost.{name} types {loose} as Any; name the type"


def test_the_facade_names_the_protocols_a_plugin_must_meet() -> None:
    assert typing.get_type_hints(PluginHost.backend)["return"] == Backend | None
    assert typing.get_type_hints(PluginHost.knowledge_store)["return"] == KnowledgeStore | None
    assert typing.get_type_hints(PluginHost.embedder)["return"] == Embedder | None
    assert typing.get_type_hints(hookspecs.observe_projection)["projection"] is ProjectedContext
    assert typing.get_type_hints(hookspecs.observe_model_call)["call"] is ModelCall
    assert typing.get_type_hints(hookspecs.observe_stable_prefix)["prefix"] is StablePrefix
