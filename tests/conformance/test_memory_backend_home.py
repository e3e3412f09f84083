"""The in-memory reference backend lives with the other backends (``contextplane.backends.memory``):
it is an implementation of the record protocols, not a test helper, so importing it pulls in
neither the conformance kit nor pytest; its old path ``contextplane.testing.memory`` re-exports
the same classes, so the kit and third parties that import it from there keep working."""

from __future__ import annotations

import subprocess
import sys

import contextplane.backends.memory as home
import contextplane.testing.memory as old_path

NAMES = (
    "InMemoryBackend",
    "InMemoryInjectionLog",
    "InMemoryKnowledgeStore",
    "InMemorySessionSummaries",
    "InMemorySnapshotStore",
)


def test_the_old_path_re_exports_the_same_classes() -> None:
    assert sorted(old_path.__all__) == sorted(NAMES)
    for name in NAMES:
        assert getattr(old_path, name) is getattr(home, name), name
        assert getattr(home, name).__module__ == "contextplane.backends.memory", name


def test_the_backend_imports_neither_the_kit_nor_pytest() -> None:
    code = (
        "import sys, contextplane.backends.memory\n"
        "print(sorted(m for m in sys.modules if m == 'pytest' or m.startswith('contextplane.testing')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_backend_from_its_home_keeps_and_finds_a_memory() -> None:
    backend = home.InMemoryBackend()
    chunk_id = backend.memories.add_chunk("The deploy window is Tuesday", source_type="operator")
    assert [h.chunk.id for h in backend.memories.search("deploy window", 3)] == [chunk_id]
