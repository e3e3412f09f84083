"""The section kit's harness: the plugin under test on private hosts, and what every check shares.

Every host is new, so a check never sees state another check left in a host; the standard
sections (the ``contextplane`` entry points of the ``contextplane`` distribution itself) are
added only for the checks that need them beside the plugin (names, envelopes, ordering).
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import warnings
from collections.abc import Sequence
from typing import Literal, Protocol, TypeVar

import pytest

from contextplane.config import Config
from contextplane.notices import ContextPlaneWarning
from contextplane.plugins import ENTRY_POINT_GROUP, PluginHost
from contextplane.testing._base import (
    ConformanceBase,
    KitUsageError,
    PluginNotLoadable,
    required_fixture,
)
from contextplane.testing.requirements import Requirement


@functools.cache
def standard_plugins() -> tuple[tuple[str, object], ...]:
    """The standard sections: ``contextplane`` entry points shipped by the contextplane
    distribution itself (name, plugin object), loaded once per process."""
    found: list[tuple[str, object]] = []
    for ep in sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else ""
        if dist.replace("_", "-").lower() != "contextplane":
            continue
        try:
            found.append((ep.name, ep.load()))
        except Exception:  # a broken standard plugin is the core suite's business, not the kit's
            continue
    return tuple(found)


class Quiet:
    """Silences contextplane's own warnings while the kit drafts and composes (they are the
    plugin author's business in their own tests, not noise in every check)."""

    def __enter__(self) -> None:
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", ContextPlaneWarning)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(None, None, None)


def describe_error(exc: BaseException) -> str:
    """An exception as ``Type: message``, for failure messages."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Harness:
    """One plugin under test on private hosts: with only its companions, or beside the standard
    sections. Every host is new, so a check never sees state another check left in a host."""

    def __init__(self, plugin: object, companions: Sequence[object] = ()) -> None:
        self.plugin = plugin
        self.companions = tuple(companions)

    def host(self, config: Config, *, standard: bool = False) -> tuple[PluginHost, str]:
        """A fresh host and the name the plugin was registered under."""
        host = PluginHost(config, strict=False)
        if standard:
            mine = (self.plugin, *self.companions)
            for ep_name, obj in standard_plugins():
                if not any(obj is m for m in mine):
                    host.register(obj, ep_name)
        for companion in self.companions:
            if host.register(companion) is None:
                raise PluginNotLoadable(
                    "a companion plugin could not be registered: " + host.failures[-1].describe()
                )
        name = host.register(self.plugin)
        if name is None:
            raise PluginNotLoadable(
                "the plugin under test could not be registered: " + host.failures[-1].describe()
            )
        return host, name

    @staticmethod
    def _collect_failures(host: PluginHost, name: str) -> None:
        for failure in host.failures:
            if failure.plugin == name:
                raise PluginNotLoadable(
                    f"the plugin under test failed to register its sections: {failure.describe()}"
                )


class SectionPluginBase(ConformanceBase):
    """Fixtures every section plugin supplies."""

    @pytest.fixture
    def plugin(self) -> object:
        """Return the plugin object exactly as your ``contextplane`` entry point loads it: usually
        your module (``import my_plugin; return my_plugin``), or the instance your entry point
        names. It must implement ``register_prompt_sections`` and/or ``register_context_sections``."""
        raise required_fixture(self, "plugin", SectionPluginBase.plugin.__doc__)

    @pytest.fixture
    def companion_plugins(self) -> Sequence[object]:
        """Optional. Return other plugins your plugin needs beside the standard sections (for
        example the plugin that provides a section your ``after`` names). Default: none."""
        return ()

    @pytest.fixture
    def harness(self, plugin: object, companion_plugins: Sequence[object]) -> Harness:
        """Internal: the plugin under test on private hosts."""
        return Harness(plugin, companion_plugins)


def text_diff(what: str, a: str, b: str) -> str:
    """``what``, with where two texts first differ."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            lo = max(0, i - 30)
            return f"{what}: first difference at char {i}: {a[lo : i + 30]!r} vs {b[lo : i + 30]!r}"
    return f"{what}: lengths {len(a)} vs {len(b)}"


def check_registered_once(
    requirement: Requirement, kind: Literal["prompt", "context"], name: str, host: PluginHost
) -> None:
    """Fail ``requirement`` unless exactly one plugin on ``host`` registers a ``kind`` section
    called ``name``.

    Why one check for both kinds: a name is how authority ordering, envelopes, reports and the
    ``[plugin.<name>]`` settings find a section, for prompt and context sections alike; two
    owners would make which one runs depend on load order. The prompt and context kits ask it
    the same way, so they ask it here."""
    with Quiet():
        regs = host.prompt_sections() if kind == "prompt" else host.context_sections()
    owners = [r.plugin for r in regs if r.section.name == name]
    requirement.check(
        len(owners) == 1,
        f"{kind} section {name!r} is registered {len(owners)} times, by plugins "
        f"{', '.join(repr(o) for o in owners)}; rename it",
    )


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_Section = TypeVar("_Section", bound=_Named)


def choose_section(
    kind: Literal["prompt", "context"], chosen: str | None, mine: Sequence[_Section]
) -> _Section:
    """The section a kit class checks among the ``kind`` sections its plugin registers: the only
    one, or the one the class names (``prompt_section``/``context_section``). Anything else is a
    usage error saying what to set; both kits choose alike, so they choose here."""
    other = "context" if kind == "prompt" else "prompt"
    if not mine:
        raise KitUsageError(
            f"the plugin registers no {kind} section; use {other.capitalize()}SectionConformance for a "
            f"plugin that only contributes {other} sections"
        )
    if chosen is None:
        if len(mine) > 1:
            raise KitUsageError(
                f"the plugin registers several {kind} sections "
                f"({', '.join(s.name for s in mine)}); set the class attribute {kind}_section to "
                "the one this class checks (write one class per section)"
            )
        return mine[0]
    for s in mine:
        if s.name == chosen:
            return s
    raise KitUsageError(
        f"{kind}_section = {chosen!r}, but the plugin registers only {', '.join(s.name for s in mine)}"
    )
