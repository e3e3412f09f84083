"""The section kit must fail, with the right requirement id, on a plugin broken on purpose.

The breaks live in cases_broken_tickets.py and run in a child pytest against the installed
open-tickets distribution, exactly as its author would run the kit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextplane.testing import requirements_of
from tests.conformance.helpers import Run, run_pytest

HERE = Path(__file__).resolve().parent
CONTEXT_IDS = {r.id for r in requirements_of("context")}


@pytest.fixture(scope="module")
def breaks(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_pytest(
        [HERE / "cases_broken_tickets.py"], tmp_path_factory.mktemp("breaks"), pythonpath=[site]
    )


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        ("TestWrongShed", {"CTX-SHED-ORDER"}),
        # A draft that changes on every call cannot give one session the same rows twice either.
        ("TestNondeterministic", {"CTX-DETERMINISTIC", "CTX-SESSION-ISOLATION"}),
        ("TestBreakout", {"CTX-NO-BREAKOUT"}),
        ("TestNoShortForms", {"CTX-SHED-ORDER"}),
        ("TestReadsMemory", {"CTX-MEMORY-FLAG"}),
        ("TestLeakyCache", {"CTX-SESSION-ISOLATION"}),
    ],
)
def test_each_break_fails_with_its_requirement_id(breaks: Run, cls: str, expected: set[str]) -> None:
    outcomes = breaks.by_class(cls)
    assert set(outcomes) == CONTEXT_IDS, breaks.stdout[-3000:]  # the whole kit ran
    assert breaks.failing(cls) == expected, {k: v.outcome for k, v in outcomes.items()}
    for req in expected:
        assert outcomes[req].message.startswith(
            f"contextplane.testing.requirements.ConformanceFailure: [{req}] "
        ), outcomes[req].message


def test_failure_messages_say_what_was_broken(breaks: Run) -> None:
    shed = breaks.by_class("TestWrongShed")["CTX-SHED-ORDER"].message
    assert "Under a shrinking budget the section gives up space as its declared shed behaviour says" in shed
    assert (
        "row 'OPS-7' (listed 1 of 3, rank 9) is in short form while row 'OPS-3' (listed 2, rank 8) is in full"
        in shed
    )
    assert "give the first rank 1" in shed
    nondet = breaks.by_class("TestNondeterministic")["CTX-DETERMINISTIC"].message
    assert "two drafts for one request differ: row 1 is Row(id='OPS-7'" in nondet
    breakout = breaks.by_class("TestBreakout")["CTX-NO-BREAKOUT"].message
    assert (
        "tags in the composed text that the layout did not put there: ['</SYS>', '</injected_memory>', '</open_tickets>'"
        in breakout
    )
    assert "Open tickets on CONFORMANCE-PAYLOAD </open_tickets>" in breakout  # the composed text is shown
    degrade = breaks.by_class("TestNoShortForms")["CTX-SHED-ORDER"].message
    assert "declares Shed.DEGRADE, but no row has a short form shorter than its text" in degrade
    memory = breaks.by_class("TestReadsMemory")["CTX-MEMORY-FLAG"].message
    assert "declares carries_memory=False but its draft read knowledge_store.search" in memory
    leak = breaks.by_class("TestLeakyCache")["CTX-SESSION-ISOLATION"].message
    assert (
        "session 'conformance-web' delivered exactly what session 'conformance-a' did "
        "(('OPS-7', 'OPS-3', 'OPS-9')), though its input differs in more than the session id" in leak
    )
    # The kit's pytest plugin adds the requirement and its sentence to every failure report.
    assert "requirement CTX-NO-BREAKOUT: Text from the section's data can never close" in breaks.stdout


def test_known_gaps_are_strict_xfails_and_missing_capabilities_skip(breaks: Run) -> None:
    gap = breaks.by_class("TestWrongShedKnownGap")
    assert gap["CTX-SHED-ORDER"].outcome == "xfailed"
    assert "known gap CTX-SHED-ORDER: ranks are inverted until 0.2" in gap["CTX-SHED-ORDER"].message
    assert breaks.failing("TestWrongShedKnownGap") == set()
    stale = breaks.by_class("TestStaleKnownGap")
    assert stale["CTX-DETERMINISTIC"].outcome == "failed"
    assert "XPASS(strict)" in stale["CTX-DETERMINISTIC"].message
    skipped = breaks.by_class("TestNoShortForms")["CTX-MAX-CHARS"]
    assert skipped.outcome == "skipped"
    assert "capability 'max_chars' not declared" in skipped.message


def test_dash_k_selects_one_requirement(site: Path, tmp_path: Path) -> None:
    run = run_pytest([HERE / "cases_broken_tickets.py"], tmp_path, "-k", "CTX-SHED-ORDER", pythonpath=[site])
    assert len(run.outcomes) == 10
    assert all(test_id.endswith("[CTX-SHED-ORDER]") for test_id in run.outcomes)


def test_dash_m_conformance_selects_the_kit(site: Path, tmp_path: Path) -> None:
    # The repo runs with --strict-markers, so this also shows the plugin registered the marker.
    run = run_pytest(
        [HERE / "cases_broken_tickets.py"],
        tmp_path,
        "-m",
        "conformance",
        "-k",
        "TestBreakout",
        pythonpath=[site],
    )
    assert len(run.outcomes) == len(CONTEXT_IDS)
    assert "not found in `markers` configuration option" not in run.stdout + run.stderr


def test_usage_errors_say_what_to_do(site: Path, tmp_path: Path) -> None:
    run = run_pytest(
        [HERE / "cases_usage_errors.py"], tmp_path, "--continue-on-collection-errors", pythonpath=[site]
    )
    out = run.stdout
    assert (
        "TestMisspelledGap.known_gaps names 'CTX-SHED-ORDR', which is not a requirement id; "
        "did you mean 'CTX-SHED-ORDER'?" in out
    )
    assert "TestUnknownCapability.capabilities names ['time_travel']; known capabilities:" in out
    missing = run.by_class("TestMissingFixtures")
    assert set(missing) == CONTEXT_IDS and all(o.outcome == "error" for o in missing.values())
    assert (
        "TestMissingFixtures must define the fixture 'section_input' (a method decorated with "
        "@pytest.fixture in the class): Return a ``contextplane.testing.SectionInput`` under which"
    ) in missing["CTX-SHED-ORDER"].message
    unloadable = run.by_class("TestUnloadablePlugin")["CTX-DRAFT-VALID"]
    assert unloadable.outcome == "failed"
    assert (
        "PluginNotLoadable: the plugin under test could not be registered: plugin 'bad_signature_plugin' "
        "failed during validation: PluginValidationError" in unloadable.message
    )


def test_prompt_kit_fails_on_a_misspelled_constraint(breaks: Run) -> None:
    assert breaks.failing("TestPromptTypo") == {"PROMPT-VALID-REFS", "PROMPT-POSITION"}
    message = breaks.by_class("TestPromptTypo")["PROMPT-VALID-REFS"].message
    assert (
        "'ticket_etiquette' declares after='tool_guidence', but no section of that name is registered"
        in message
    )


def test_an_async_form_that_drifts_fails_async_parity_in_every_check_that_composes(breaks: Run) -> None:
    outcomes = breaks.by_class("TestAsyncDrift")
    assert set(outcomes) == CONTEXT_IDS, breaks.stdout[-3000:]
    failing = breaks.failing("TestAsyncDrift")
    # Only the checks that never compose (a name count, the draft's ids) pass: every scenario
    # any other check composes shows the drift.
    assert CONTEXT_IDS - failing == {"CTX-UNIQUE-NAME", "CTX-ROW-IDS-RANKS"}, failing
    for req in failing:
        assert outcomes[req].message.startswith(
            "contextplane.testing.requirements.ConformanceFailure: [CTX-ASYNC-PARITY] The async "
            "composition (acompose_projected_context) gives every input the projection the sync one gives"
        ), (req, outcomes[req].message)
    parity = outcomes["CTX-ASYNC-PARITY"].message
    assert "adraft drafts differently from draft: 3 rows then 2" in parity, parity
    shed = outcomes["CTX-SHED-ORDER"].message
    assert "composed through acompose_projected_context (unbounded), the projected text differs" in shed, shed


def test_async_parity_as_a_known_gap_checks_the_sync_path_alone(breaks: Run) -> None:
    gap = breaks.by_class("TestAsyncDriftKnownGap")
    assert gap["CTX-ASYNC-PARITY"].outcome == "xfailed"
    assert "known gap CTX-ASYNC-PARITY: the async client pages differently" in gap["CTX-ASYNC-PARITY"].message
    assert breaks.failing("TestAsyncDriftKnownGap") == set()
