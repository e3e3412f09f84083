"""Fixtures for the OpenAI Agents SDK adapter: tracing off, and the ``lookup`` tool; the marker
sections, the embedded backend, the host and the runtime come from ``tests.adapter_helpers``
(shared with the other adapters' tests). The model is the SDK's own
``agents.testing.ScriptedModel``: no network, no API key.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agents import function_tool, set_tracing_disabled

from tests.adapter_helpers import (
    MARK,
    MEMTEXT,
    BrokenSection,
    MarkerSections,
    backend,
    host,
    make_host,
    runtime,
    sections,
)

#: The shared fixtures (pytest finds them here) and names the tests import from this module.
__all__ = [
    "MARK", "MEMTEXT", "BrokenSection", "MarkerSections", "backend", "host", "make_host", "runtime", "sections",
]  # fmt: skip


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    """The SDK's tracing exports to OpenAI by default: off, so no test reaches the network."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@function_tool
def lookup(topic: str) -> str:
    """Look something up."""
    return f"looked up {topic}"
