"""Test classes set up wrongly, to show the kit's usage errors (run by test_section_kit.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import contextplane_open_tickets as tickets
import pytest

from contextplane import hookimpl
from contextplane.testing import ContextSectionConformance, KnowledgeStoreConformance, SectionInput


class TestMissingFixtures(ContextSectionConformance):
    """Defines ``plugin`` only: every check needing ``section_input`` says what to return."""

    @pytest.fixture
    def plugin(self) -> object:
        return tickets


class TestMisspelledGap(ContextSectionConformance):
    known_gaps: ClassVar[Mapping[str, str]] = {"CTX-SHED-ORDR": "typo"}


class TestUnknownCapability(KnowledgeStoreConformance):
    capabilities = frozenset({"time_travel"})


class BadSignature:
    plugin_name = "bad_signature_plugin"

    @hookimpl
    def register_context_sections(self, register: object, tenant: str) -> None:
        raise AssertionError("never called")


class TestUnloadablePlugin(ContextSectionConformance):
    @pytest.fixture
    def plugin(self) -> object:
        return BadSignature()

    @pytest.fixture
    def section_input(self) -> SectionInput:
        return SectionInput()
