"""The open-tickets plugin broken on purpose, under the section kit (run by
test_section_kit.py in a child pytest with the installed distribution on the path; the file
name keeps the main run from collecting it).

Each break is a plugin object that reuses the real plugin's code and changes one thing, the
way a plausible bug would. ``Fixtures`` is the same set of fixtures the distribution's own
test class uses, so every class here differs from the passing one only in ``plugin``.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import attrs
import contextplane_open_tickets as tickets
import pytest

from contextplane import (
    BuildContext,
    Config,
    ContextSection,
    Draft,
    ProjectionRequest,
    PromptSection,
    Row,
    hookimpl,
)
from contextplane.testing import ContextSectionConformance, PromptSectionConformance, SectionInput

TICKETS = [
    {"key": "OPS-7", "title": "Disk alarm on db-2", "priority": 1, "project": "infra"},
    {"key": "OPS-9", "title": "Rotate the API keys", "priority": 3, "assignee": "ada"},
    {"key": "OPS-3", "title": "Flaky deploy job", "priority": 2},
    {"key": "WEB-1", "title": "Landing page typo", "priority": 4, "project": "web"},
]


def _input(path: Path, data: object) -> SectionInput:
    path.write_text(json.dumps(data), encoding="utf-8")
    return SectionInput(
        config=Config(plugin={"open_tickets": {"file": str(path), "floor": 1}}), project="infra"
    )


class Fixtures(ContextSectionConformance):
    @pytest.fixture
    def section_input(self, tmp_path: Path) -> SectionInput:
        return _input(tmp_path / "tickets.json", {"board": "Platform", "tickets": TICKETS})

    @pytest.fixture
    def second_session_input(self, section_input: SectionInput) -> SectionInput:
        return attrs.evolve(section_input, project="web", session_id="conformance-web")

    @pytest.fixture
    def hostile_input(self, tmp_path: Path) -> Callable[[str], SectionInput]:
        def make(text: str) -> SectionInput:
            rows = [{"key": "EVIL-1", "title": text, "assignee": text, "priority": 1}]
            return _input(tmp_path / "hostile.json", {"board": text, "tickets": [*rows, *TICKETS]})

        return make


class _Variant:
    """The real context section with one part replaced."""

    plugin_name = "open_tickets_variant"

    def section(self, config: Config) -> ContextSection:
        return tickets.make_section(config)

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None], config: Config) -> None:
        register(self.section(config))


class WrongShed(_Variant):
    """Break 1, wrong shed behaviour: reads priority as "higher number is more important", so
    under pressure the most urgent tickets are shed first."""

    def section(self, config: Config) -> ContextSection:
        def draft(request: ProjectionRequest) -> Draft:
            shown = tickets.visible(tickets.load_tickets(request), request.project)
            return Draft([tickets.ticket_row(t, 10 - tickets._priority(t)) for t in shown])

        return attrs.evolve(super().section(config), draft=draft)


class Nondeterministic(_Variant):
    """Break 2, nondeterministic output: stamps every row with the time it was drafted."""

    def section(self, config: Config) -> ContextSection:
        def draft(request: ProjectionRequest) -> Draft:
            now = dt.datetime.now(dt.UTC).isoformat()
            rows = tickets.draft(request).rows
            return Draft([attrs.evolve(r, text=f"{r.text} (as of {now})") for r in rows])

        return attrs.evolve(super().section(config), draft=draft)


class Breakout(_Variant):
    """Break 3, envelope breakout: puts the board name from the data file into the heading,
    which is trusted text the core does not escape."""

    def section(self, config: Config) -> ContextSection:
        path = config.plugin_settings("open_tickets")["file"]
        board = json.loads(Path(path).read_text(encoding="utf-8")).get("board", "")
        return attrs.evolve(super().section(config), heading=f"Open tickets on {board}:")


class NoShortForms(_Variant):
    """Break 4, declared shed not honoured: declares DEGRADE but gives no short forms, so it can
    only drop rows. It also drops its declared size, to show a capability skip."""

    def section(self, config: Config) -> ContextSection:
        def draft(request: ProjectionRequest) -> Draft:
            return Draft([attrs.evolve(r, short=None) for r in tickets.draft(request).rows])

        return attrs.evolve(super().section(config), draft=draft, max_chars=None)


class ReadsMemory(_Variant):
    """Break 5, wrong memory flag: looks up notes about each ticket in the knowledge store, but
    still declares carries_memory=False, so incognito turns would deliver memory."""

    def section(self, config: Config) -> ContextSection:
        def draft(request: ProjectionRequest) -> Draft:
            rows = list(tickets.draft(request).rows)
            if request.knowledge_store is not None:
                hits = request.knowledge_store.search(" ".join(r.id for r in rows), 3)
                rows += [Row(f"note-{h.chunk.id}", 100 + h.rank, h.chunk.content) for h in hits]
            return Draft(rows)

        return attrs.evolve(super().section(config), draft=draft)


class LeakyCache(_Variant):
    """Break 6, state leaking between sessions: keeps the last draft for a minute to spare the
    file system, keyed by nothing, so the next session sees the previous session's tickets."""

    def __init__(self) -> None:
        self._last: tuple[float, Draft] | None = None

    def section(self, config: Config) -> ContextSection:
        def draft(request: ProjectionRequest) -> Draft:
            if self._last is not None and time.monotonic() - self._last[0] < 60:
                return self._last[1]
            fresh = tickets.draft(request)
            self._last = (time.monotonic(), fresh)
            return fresh

        return attrs.evolve(super().section(config), draft=draft)


class AsyncDrift(_Variant):
    """Break 7, the async form drifts from the sync one: an ``adraft`` written later that forgot
    the oldest ticket (an off-by-one in its own paging), so async runtimes see one ticket fewer."""

    def section(self, config: Config) -> ContextSection:
        async def adraft(request: ProjectionRequest) -> Draft:
            return Draft(tickets.draft(request).rows[:-1])

        return attrs.evolve(super().section(config), adraft=adraft)


class TestWrongShed(Fixtures):
    @pytest.fixture
    def plugin(self) -> object:
        return WrongShed()


class TestNondeterministic(Fixtures):
    @pytest.fixture
    def plugin(self) -> object:
        return Nondeterministic()


class TestBreakout(Fixtures):
    @pytest.fixture
    def plugin(self) -> object:
        return Breakout()


class TestNoShortForms(Fixtures):
    @pytest.fixture
    def plugin(self) -> object:
        return NoShortForms()


class TestReadsMemory(Fixtures):
    @pytest.fixture
    def plugin(self) -> object:
        return ReadsMemory()


class TestLeakyCache(Fixtures):
    @pytest.fixture
    def plugin(self) -> object:
        return LeakyCache()


class TestAsyncDrift(Fixtures):
    @pytest.fixture
    def plugin(self) -> object:
        return AsyncDrift()


class TestAsyncDriftKnownGap(Fixtures):
    """The same drift declared as a known gap: the sync path is checked alone, and the parity
    check is a strict xfail."""

    known_gaps: ClassVar[Mapping[str, str]] = {"CTX-ASYNC-PARITY": "the async client pages differently"}

    @pytest.fixture
    def plugin(self) -> object:
        return AsyncDrift()


class TestWrongShedKnownGap(Fixtures):
    """A declared known gap: the failing check becomes a strict xfail."""

    known_gaps: ClassVar[Mapping[str, str]] = {"CTX-SHED-ORDER": "ranks are inverted until 0.2"}

    @pytest.fixture
    def plugin(self) -> object:
        return WrongShed()


class TestStaleKnownGap(Fixtures):
    """A known gap that is no longer a gap: the strict xfail passes, which fails the run."""

    known_gaps: ClassVar[Mapping[str, str]] = {"CTX-DETERMINISTIC": "was nondeterministic once"}

    @pytest.fixture
    def plugin(self) -> object:
        return tickets


class TestPromptTypo(PromptSectionConformance):
    """A prompt section whose ``after`` misspells a standard section's name."""

    @pytest.fixture
    def plugin(self) -> object:
        return PromptTypo()

    @pytest.fixture
    def build_context(self) -> BuildContext:
        return BuildContext(config=Config())


class PromptTypo:
    plugin_name = "open_tickets_prompt_typo"

    @hookimpl
    def register_prompt_sections(self, register: Callable[[PromptSection], None]) -> None:
        register(attrs.evolve(tickets.ETIQUETTE_SECTION, after=("tool_guidence",)))
