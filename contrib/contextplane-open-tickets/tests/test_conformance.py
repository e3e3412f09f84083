"""The whole contextplane conformance kit, run against this plugin: one class and its fixtures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import contextplane_open_tickets
import pytest

from contextplane import BuildContext, Config
from contextplane.testing import SectionInput, SectionPluginConformance

TICKETS = [
    {"key": "OPS-7", "title": "Disk alarm on db-2", "priority": 1, "project": "infra"},
    {"key": "OPS-9", "title": "Rotate the API keys", "priority": 3, "assignee": "ada"},
    {"key": "OPS-3", "title": "Flaky deploy job", "priority": 2},
    {"key": "WEB-1", "title": "Landing page typo", "priority": 4, "project": "web"},
    {"key": "OPS-1", "title": "Old closed ticket", "priority": 1, "status": "closed"},
]


def _input(path: Path, data: object, project: str | None = "infra") -> SectionInput:
    path.write_text(json.dumps(data), encoding="utf-8")
    config = Config(plugin={"open_tickets": {"file": str(path), "floor": 1}})
    return SectionInput(config=config, project=project)


class TestOpenTickets(SectionPluginConformance):
    prompt_max_chars = 400

    @pytest.fixture
    def plugin(self) -> object:
        return contextplane_open_tickets

    @pytest.fixture
    def build_context(self) -> BuildContext:
        return BuildContext(config=Config(), tools=("tracker",))

    @pytest.fixture
    def section_input(self, tmp_path: Path) -> SectionInput:
        return _input(tmp_path / "tickets.json", {"board": "Platform", "tickets": TICKETS})

    @pytest.fixture
    def second_session_input(self, section_input: SectionInput) -> SectionInput:
        return SectionInput(config=section_input.config, project="web", session_id="conformance-web")

    @pytest.fixture
    def hostile_input(self, tmp_path: Path) -> Callable[[str], SectionInput]:
        def make(text: str) -> SectionInput:
            tickets = [
                {"key": "EVIL-1", "title": text, "assignee": text, "priority": 1},
                {"key": text, "title": "key from data", "priority": 2},
            ]
            return _input(tmp_path / "hostile.json", {"board": text, "tickets": tickets})

        return make
