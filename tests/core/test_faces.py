"""The three faces (issue 25, step 4): the root for a runtime author, ``contextplane.section``
for a section author, ``contextplane.backend`` for a store or backend author.

What is held: every name the root exported before the faces still resolves from ``contextplane``
to the very object its face holds (third parties import them); each face's name is its defining
module's object; a face imports nothing heavy, and asking one face for another's name does not
load the other; the examples CONTRIBUTING.md and docs/architecture.md give for each face run,
each in an empty directory; the standard sections import core section names from their face.

Subprocesses where what a fresh interpreter loads is the claim (this process has long since
imported everything) and for the examples (they load plugins and open stores).
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import contextplane
import contextplane.backend
import contextplane.section

REPO = Path(__file__).resolve().parents[2]

#: What ``contextplane.__all__`` held before the faces (55 names): third parties import these,
#: so each must keep resolving from the root, to the same object, whatever ``__all__`` says.
EXPORTED_BEFORE_THE_FACES = (
    "AUTHORITY_ORDER", "AsyncEmbedder", "AsyncKnowledgeStore", "Backend", "BuildContext", "Config",
    "ConfigError", "ContextPlaneError", "ContextSection", "Delivered", "Draft", "Embedder", "Envelope",
    "IncognitoWriteError", "InjectionLog", "InjectionRecord", "KnowledgeStore", "MemoryChunk",
    "MessageCodec", "ModelCall", "PluginHost", "PluginLoadError", "PluginWarning", "PrefixSection",
    "ProjectedContext", "ProjectionRequest", "PromptSection", "Row", "Runtime", "SearchHit",
    "SectionError", "SectionOrderError", "SectionReport", "SessionSummaries", "Shed", "SnapshotStore",
    "StablePrefix", "StoreError", "Surface", "Turn", "ValidationError", "acompose",
    "acompose_projected_context", "adeliver", "build_stable_prefix", "compose",
    "compose_projected_context", "deliver", "get_host", "hookimpl", "load_config", "open_backend",
    "open_runtime", "plugin_host_with", "warn_once",
)
#: Old names no face lists: what a ``Runtime`` does now (``runtime.compose(request)``, ...).
#: They resolve from the root and from their defining modules (CHANGELOG.md says so).
IN_NO_FACE = {"compose", "acompose", "deliver", "adeliver"}
FACES = (contextplane, contextplane.section, contextplane.backend)
#: What no face may load on import: the store and the libraries only it needs.
HEAVY = ("apsw", "cattrs", "numpy", "sqlite_vec")


def face_of(name: str) -> object:
    """The face that lists ``name`` (the root first), else its defining module."""
    for face in FACES:
        if name in face.__all__:
            return face
    assert name in IN_NO_FACE, f"{name} was exported by the root and is now in no face"
    return importlib.import_module(contextplane._WHERE[name])


def test_the_root_lists_the_runtime_authors_names_only() -> None:
    assert len(EXPORTED_BEFORE_THE_FACES) == 55
    assert len(contextplane.__all__) <= 26, "the runtime face is about 25 names (issue 25)"
    assert {"open_runtime", "Runtime", "Turn", "MessageCodec", "ProjectionRequest"} <= set(contextplane.__all__)
    assert not {"Row", "hookimpl", "KnowledgeStore", "ChunkWrites"} & set(contextplane.__all__)
    placed = {n for n in EXPORTED_BEFORE_THE_FACES if any(n in face.__all__ for face in FACES)}
    assert set(EXPORTED_BEFORE_THE_FACES) - placed == IN_NO_FACE


@pytest.mark.parametrize("name", EXPORTED_BEFORE_THE_FACES)
def test_every_old_root_name_is_its_faces_object(name: str) -> None:
    exec(f"from contextplane import {name} as got", namespace := {})
    assert namespace["got"] is getattr(contextplane, name) is getattr(face_of(name), name)


@pytest.mark.parametrize("face", FACES[1:], ids=lambda face: face.__name__)
def test_every_face_name_is_its_defining_modules_object(face: Any) -> None:
    where = face._WHERE
    for name in face.__all__:
        value = getattr(face, name)
        assert value is getattr(importlib.import_module(where[name]), name), name
        if name in contextplane._WHERE:  # in two faces: one object
            assert value is getattr(contextplane, name), name


def test_a_name_asked_of_the_wrong_face_says_which_face_has_it() -> None:
    with pytest.raises(AttributeError, match=r"it is in contextplane\.backend: from contextplane\.backend import KnowledgeStore"):
        contextplane.section.KnowledgeStore  # noqa: B018
    with pytest.raises(ImportError):  # ``from``-imports word it their own way, still an error
        exec("from contextplane.section import KnowledgeStore")
    with pytest.raises(AttributeError, match=r"it is in contextplane\.section"):
        contextplane.backend.Draft  # noqa: B018
    with pytest.raises(AttributeError, match=r"it is in contextplane\.backend: from contextplane\.backend import ChunkWrites"):
        contextplane.ChunkWrites  # noqa: B018
    with pytest.raises(AttributeError, match=r"has no attribute 'Nowhere'$"):
        contextplane.section.Nowhere  # noqa: B018


def fresh_modules(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    res = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print('\\n'.join(sorted(sys.modules)))"],
        capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return set(res.stdout.split())


@pytest.mark.parametrize(
    "code",
    [
        "import contextplane.section",
        "import contextplane.backend",
        # what a section declares is values only: no store, no configuration converter
        "from contextplane.section import ContextSection, PromptSection, Row, Draft, Envelope, Shed, "
        "ProjectionRequest, BuildContext, Surface, warn_once, PluginWarning, SectionError",
        # declaring a hook: the marker alone, not the typed specs (which load the store)
        "from contextplane.section import hookimpl",
        "from contextplane import hookimpl",
    ],
)
def test_a_face_imports_nothing_heavy(code: str) -> None:
    loaded = fresh_modules(code)
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m.startswith("contextplane.store"))
    assert not heavy, f"{code!r} loaded {heavy}"


def test_importing_from_one_face_does_not_load_another() -> None:
    """``from face import X`` makes the import system probe the face (``__path__``); the probe
    must not fall into the hint that names another face, which imports it."""
    loaded = fresh_modules("from contextplane.section import Row\nfrom contextplane import Config")
    assert "contextplane.section" in loaded and "contextplane.backend" not in loaded
    loaded = fresh_modules("from contextplane.backend import SearchHit")
    assert "contextplane.section" not in loaded


# --- the examples -------------------------------------------------------------------------


def blocks(doc: str, start: str) -> list[str]:
    """The Python blocks of ``doc`` from the line ``start`` to the next heading or bullet of
    its level, dedented (the architecture doc's sit inside a bullet)."""
    text = (REPO / doc).read_text(encoding="utf-8")
    begin = text.index(start)
    nxt = re.compile(r"^(## |- \*\*)" if start.startswith("- ") else r"^## ", re.M)
    match = nxt.search(text, begin + len(start))
    part = text[begin : match.start() if match else len(text)]
    return [textwrap.dedent(code) for code in re.findall(r"^ *```python\n(.*?)^ *```", part, re.S | re.M)]


EXAMPLES = {
    "CONTRIBUTING.md": blocks("CONTRIBUTING.md", "## The three faces\n"),
    "docs/architecture.md": blocks("docs/architecture.md", "- **Role faces, lazy**"),
}
#: Each doc's examples, in order: the face each shows, by the import it must make.
SHOWS = ("from contextplane import", "from contextplane.section import", "from contextplane.backend import")


def test_each_doc_has_an_example_per_face() -> None:
    for doc, found in EXAMPLES.items():
        assert len(found) == 3, f"{doc}: {len(found)} examples of the three faces"
        for code, face in zip(found, SHOWS, strict=True):
            assert face in code, f"{doc}: an example does not import {face!r}"
        assert "runtime.compose(" in found[0] and "runtime.deliver(" in found[0]
        assert "register_context_sections" in found[1] and "def backend(" in found[2]


@pytest.mark.parametrize(
    ("doc", "index"), [(doc, i) for doc in EXAMPLES for i in range(3)], ids=lambda v: str(v)
)
def test_the_example_runs_in_an_empty_directory(doc: str, index: int, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTPLANE_")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"))
    res = subprocess.run(
        [sys.executable, "-c", EXAMPLES[doc][index]], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, f"{doc}, example {index + 1}:\n{res.stderr}"
    assert not any(home.rglob("*")), "the example wrote outside its directory"


def test_a_broken_example_fails(tmp_path: Path) -> None:
    """The examples' own asserts are what the run checks: one that cannot hold fails the run."""
    broken = EXAMPLES["CONTRIBUTING.md"][1].replace('== ("r1",)', '== ("r2",)')
    assert broken != EXAMPLES["CONTRIBUTING.md"][1]
    res = subprocess.run([sys.executable, "-c", broken], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "AssertionError" in res.stderr


# --- the standard sections, the example for plugin authors ----------------------------------


def test_the_standard_sections_import_core_section_names_from_their_face() -> None:
    """No standard section imports from the root: what a section needs from core that its face
    holds comes from ``contextplane.section``."""
    section_names = set(contextplane.section.__all__)
    found = []
    for file in sorted((REPO / "plugins" / "contextplane_sections").glob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("contextplane"):
                continue
            if node.module == "contextplane.section" or node.module.startswith("contextplane_"):
                continue
            in_face = [a.name for a in node.names if a.name in section_names]
            if node.module == "contextplane" or in_face:
                found.append(f"{file.name}:{node.lineno} from {node.module} import {', '.join(in_face) or '...'}")
    assert not found, "import these from contextplane.section:\n  " + "\n  ".join(found)


def test_probing_a_private_name_imports_no_other_face() -> None:
    """pytest 9.2 probes every plugin namespace for ``_mock_name`` (and the import system for
    ``__path__``): the hint that names another face must not import that face for them, or the
    kit's pytest plugin loads both faces in every pytest run."""
    loaded = fresh_modules(
        "import contextplane, contextplane.section, contextplane.backend as b\n"
        "import sys\n"
        "for m in ('contextplane.section', 'contextplane.backend'): sys.modules.pop(m)\n"
        "getattr(contextplane, '_mock_name', None); getattr(contextplane, '__wrapped__', None)"
    )
    assert not {"contextplane.section", "contextplane.backend"} & loaded, sorted(loaded)
