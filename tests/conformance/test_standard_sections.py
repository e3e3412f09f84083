"""Our own standard sections run the conformance kit, through the same classes a third party
subclasses: each class is one section, its fixtures and nothing else.

The stores behind the memory sections are real SQLite stores in the test's directory, so the
kit's compositions go through the real deliverable filter and scopes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from contextplane import BuildContext, Config
from contextplane.backends.sqlite import SQLiteSessionSummaries as SessionSummaries
from contextplane.config import structure
from contextplane.store import SQLiteKnowledgeStore
from contextplane.testing import ContextSectionConformance, PromptSectionConformance, SectionInput
from contextplane.testing.memory import InMemoryBackend
from contextplane_sections import (
    always_on,
    delegation,
    guidelines,
    identity,
    operating_model,
    prior_sessions,
    retrieved,
    skills,
    tool_guidance,
    working_state,
)

# --------------------------------------------------------------------------- prompt sections


class TestIdentity(PromptSectionConformance):
    prompt_max_chars = 200

    @pytest.fixture
    def plugin(self) -> object:
        return identity

    @pytest.fixture
    def build_context(self, tmp_path: Path) -> BuildContext:
        (tmp_path / "SOUL.md").write_text("I am Kit, the conformance agent.\n")
        config = structure({"prompt": {"soul_path": "SOUL.md"}}, base_dir=str(tmp_path))
        return BuildContext(config=config)


class TestOperatingModel(PromptSectionConformance):
    prompt_max_chars = 800

    @pytest.fixture
    def plugin(self) -> object:
        return operating_model

    @pytest.fixture
    def build_context(self) -> BuildContext:
        return BuildContext(config=Config())


class TestDelegationRoster(PromptSectionConformance):
    prompt_max_chars = 400

    @pytest.fixture
    def plugin(self) -> object:
        return delegation

    @pytest.fixture
    def build_context(self) -> BuildContext:
        return BuildContext(
            config=structure(
                {
                    "subagents": [
                        {"name": "researcher", "description": "reads papers"},
                        {"name": "hidden", "visible_to_lead": False},
                    ]
                }
            )
        )


class TestToolGuidance(PromptSectionConformance):
    prompt_max_chars = 400

    @pytest.fixture
    def plugin(self) -> object:
        return tool_guidance

    @pytest.fixture
    def build_context(self) -> BuildContext:
        config = structure({"plugin": {"tool_guidance": {"guidance": {"deploy": "only on green CI"}}}})
        return BuildContext(config=config, tools=("deploy", "search"))


class TestOperatorGuidelines(PromptSectionConformance):
    prompt_max_chars = 400

    @pytest.fixture
    def plugin(self) -> object:
        return guidelines

    @pytest.fixture
    def build_context(self) -> BuildContext:
        return BuildContext(config=structure({"prompt": {"guidelines": "Never deploy on Fridays."}}))


# --------------------------------------------------------------------------- context sections


class TestWorkingState(ContextSectionConformance):
    @pytest.fixture
    def plugin(self) -> object:
        return working_state

    @pytest.fixture
    def section_input(self) -> SectionInput:
        return SectionInput(
            state={
                "goal": "Ship the conformance kit",
                "plan": ["write the kit", "run it on the sections"],
                "tasks": [{"title": "docs", "done": False}],
            }
        )

    @pytest.fixture
    def hostile_input(self) -> Callable[[str], SectionInput]:
        return lambda text: SectionInput(state={"goal": text, "plan": [text], "tasks": [{"title": text}]})


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteKnowledgeStore]:
    with SQLiteKnowledgeStore(tmp_path / "memory.sqlite3") as store:
        yield store


class TestAlwaysOn(ContextSectionConformance):
    @pytest.fixture
    def plugin(self) -> object:
        return always_on

    @pytest.fixture
    def section_input(self, sqlite_store: SQLiteKnowledgeStore) -> SectionInput:
        sqlite_store.add_chunk("Answer in British English.", "hot", "operator")
        sqlite_store.add_chunk(
            "The operator's name is Ada.", "preferences", "operator", delivery_policy="always"
        )
        sqlite_store.add_chunk("Prefers short answers.", "hot", "conversation")
        return SectionInput(knowledge_store=sqlite_store)

    @pytest.fixture
    def hostile_input(self, sqlite_store: SQLiteKnowledgeStore) -> Callable[[str], SectionInput]:
        def make(text: str) -> SectionInput:
            sqlite_store.add_chunk(text, "hot", "operator")
            return SectionInput(knowledge_store=sqlite_store)

        return make


class TestSkills(ContextSectionConformance):
    @pytest.fixture
    def plugin(self) -> object:
        return skills

    @pytest.fixture
    def section_input(self) -> SectionInput:
        return SectionInput(
            skills_index=[
                ("pdf", "Read and fill PDF forms, extract tables and text from scanned pages."),
                ("deploy", "Roll out a service with canaries and automatic rollback on errors."),
                ("sql", "Write and explain SQL queries against the warehouse schema."),
            ]
        )

    @pytest.fixture
    def hostile_input(self) -> Callable[[str], SectionInput]:
        return lambda text: SectionInput(skills_index=[("evil", text), (text, "a skill named by data")])


class TestPriorSessions(ContextSectionConformance):
    @pytest.fixture
    def plugin(self) -> object:
        return prior_sessions

    @pytest.fixture(autouse=True)
    def _fresh_cache(self) -> Iterator[None]:
        prior_sessions.clear_cache()
        yield
        prior_sessions.clear_cache()

    @pytest.fixture
    def summaries(self, tmp_path: Path) -> Iterator[SessionSummaries]:
        s = SessionSummaries(tmp_path / "summaries.sqlite3")
        yield s
        s.close()

    @pytest.fixture
    def section_input(self, summaries: SessionSummaries) -> SectionInput:
        summaries.add("s-1", "Set up the CI pipeline.", topic="ci", at="2026-11-01T10:00:00+00:00")
        summaries.add("s-2", "Wrote the store migration.", topic="store", at="2026-11-02T10:00:00+00:00")
        summaries.add("s-3", "Reviewed the plugin docs.", topic="docs", at="2026-11-03T10:00:00+00:00")
        return SectionInput(backend=InMemoryBackend(summaries=summaries), session_id="s-3")

    @pytest.fixture
    def second_session_input(self, section_input: SectionInput) -> SectionInput:
        # Session s-1 is another session in the same file: its own summary must not be a "prior".
        return SectionInput(backend=section_input.backend, session_id="s-1")

    @pytest.fixture
    def hostile_input(self, summaries: SessionSummaries) -> Callable[[str], SectionInput]:
        def make(text: str) -> SectionInput:
            summaries.add("s-evil", text, topic=text, kind="session")
            return SectionInput(backend=InMemoryBackend(summaries=summaries), session_id="s-now")

        return make


class TestRetrieved(ContextSectionConformance):
    @pytest.fixture
    def plugin(self) -> object:
        return retrieved

    @pytest.fixture
    def section_input(self, sqlite_store: SQLiteKnowledgeStore) -> SectionInput:
        sqlite_store.add_chunk("The deploy window is Tuesday mornings.", "fact", "operator")
        sqlite_store.add_chunk("Deploy rollbacks need two approvals.", "fact", "extracted")
        sqlite_store.add_chunk("The deploy bot is called Rollo.", "general", "ingest")
        sqlite_store.add_chunk("Lunch is at noon.", "general", "operator")
        return SectionInput(query="deploy", knowledge_store=sqlite_store)

    @pytest.fixture
    def hostile_input(self, sqlite_store: SQLiteKnowledgeStore) -> Callable[[str], SectionInput]:
        def make(text: str) -> SectionInput:
            sqlite_store.add_chunk(text, "fact", "ingest")
            return SectionInput(query="CONFORMANCE-PAYLOAD", knowledge_store=sqlite_store)

        return make
