"""docs/conformance.md is the kit's reference: it must agree with the kit, id by id.

Like the hook reference test: a requirement that is undocumented, documented with another
sentence, or documented but gone, fails the suite; so does an undocumented fixture or
capability, or a public kit name that does not import.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

import contextplane.testing as kit
from contextplane.testing import RECORDS_CAPABILITIES, REQUIREMENTS, RUNTIME_CAPABILITIES, STORE_CAPABILITIES

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
TEXT = DOC.read_text(encoding="utf-8")
HEADINGS = re.findall(r"^#### ([A-Z]+(?:-[A-Z]+)+)$", TEXT, re.M)


def test_every_requirement_is_documented_once_with_its_sentence() -> None:
    assert sorted(HEADINGS) == sorted(REQUIREMENTS), "headings and REQUIREMENTS differ"
    assert len(HEADINGS) == len(set(HEADINGS))
    for req in REQUIREMENTS.values():
        after = TEXT.split(f"#### {req.id}\n", 1)[1].lstrip("\n")
        assert after.startswith(req.sentence + "\n"), f"{req.id}: the doc's sentence differs from the kit's"


def test_requirements_are_documented_in_kit_order() -> None:
    assert list(REQUIREMENTS) == HEADINGS


@pytest.mark.parametrize(
    "cls",
    [
        kit.PromptSectionConformance,
        kit.ContextSectionConformance,
        kit.KnowledgeStoreConformance,
        kit.BackendConformance,
        kit.RuntimeConformance,
    ],
)
def test_every_fixture_of_the_kit_is_documented(cls: type) -> None:
    fixtures = {
        name
        for klass in cls.__mro__
        for name, value in vars(klass).items()
        if type(value).__name__ == "FixtureFunctionDefinition"
        and name not in {"harness", "prompt", "context"}
    }
    assert fixtures, "no fixtures found: the fixture detection broke"
    for name in fixtures:
        assert f"| `{name}` |" in TEXT, f"fixture {name!r} is not in the fixture tables"


def test_every_capability_is_documented() -> None:
    capabilities = (
        STORE_CAPABILITIES
        | RECORDS_CAPABILITIES
        | RUNTIME_CAPABILITIES
        | {r.capability for r in REQUIREMENTS.values() if r.capability}
    )
    for name in capabilities:
        assert f"| `{name}` |" in TEXT, name


def test_every_public_name_imports() -> None:
    for name in kit.__all__:
        assert getattr(kit, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        kit.Nope  # noqa: B018
    assert inspect.getdoc(kit.ContextSectionConformance)


def test_the_kit_modules_are_assertion_rewritten() -> None:
    # Loaded by the pytest11 plugin before any check module is imported, so plain asserts in
    # the kit report their operands like asserts in test files do.
    import contextplane.testing._base as base
    import contextplane.testing.sections as sections
    import contextplane.testing.stores as stores

    for module in (base, sections, stores):
        assert type(module.__loader__).__name__ == "AssertionRewritingHook", module.__name__


def test_a_failure_points_to_a_reference_that_an_installed_wheel_holds(tmp_path: Path) -> None:
    """Kit failures name ``<reference>#<id>``: in a wheel the reference is shipped beside the
    kit (``force-include``), and the link resolves there, for every requirement."""
    import subprocess
    import sys
    import zipfile

    from hatchling.builders.wheel import WheelBuilder

    (wheel,) = WheelBuilder(str(DOC.parents[1])).build(
        directory=str(tmp_path / "dist"), versions=["standard"]
    )
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("contextplane/testing/conformance.md").decode("utf-8") == TEXT
        zf.extractall(site)
    probe = (
        "import json; from contextplane.testing import REQUIREMENTS\n"
        "print(json.dumps({r.id: r.reference for r in REQUIREMENTS.values()}))"
    )
    env = {"PYTHONPATH": str(site), "PATH": ""}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    references = json.loads(out.stdout)
    assert sorted(references) == sorted(REQUIREMENTS)
    shipped = site / "contextplane" / "testing" / "conformance.md"
    for req_id, reference in references.items():
        path, anchor = reference.split("#")
        assert Path(path) == shipped  # the installed copy, not a source tree the user lacks
        assert anchor == req_id.lower() and f"\n#### {req_id}\n" in shipped.read_text(encoding="utf-8")
    # In this checkout (an editable install) the link is the source tree's docs/conformance.md.
    assert REQUIREMENTS["CTX-SHED-ORDER"].reference == f"{DOC}#ctx-shed-order"
