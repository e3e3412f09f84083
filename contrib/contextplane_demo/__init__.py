"""``contextplane demo``: the main job on the embedded default, end to end, in seconds.

It creates a local SQLite backend in a fresh directory, seeds it with a realistic sample
(every kind of row the delivery rules must handle, and prior-session summaries), runs a
scripted multi-turn session on a ``Runtime`` (``open_runtime``, ``compose``, ``deliver``) with the
standard sections,
prints each turn's budget table and ends with checks that hold the ADR's promises: within
budget on every turn, no non-deliverable row ever delivered, incognito and goal turns
suppressed what they must, the injection log matches what was delivered. The checks are
computed from what was composed and logged, not asserted by construction.

It is a package of its own, outside the core, because it is a user of the core like any
other: it reaches the core only through its public API and the backend, and the command line
finds it through the ``contextplane.commands`` entry point (``contextplane_demo.command``).

- ``fixtures``: the persona, the skills catalogue, the seeded rows, the configuration;
- ``script``: the scripted turns;
- ``checks``: the checks, from the projections, the injection log and the sections' flags;
- ``session``: ``run_demo``, which puts them together.
"""

from __future__ import annotations

from contextplane_demo.checks import Check, run_checks
from contextplane_demo.fixtures import PROJECT, SESSION, Seeded, demo_config, seed, write_fixture_files
from contextplane_demo.script import TURNS, Turn
from contextplane_demo.session import DemoResult, run_demo

__all__ = [
    "PROJECT",
    "SESSION",
    "TURNS",
    "Check",
    "DemoResult",
    "Seeded",
    "Turn",
    "demo_config",
    "run_checks",
    "run_demo",
    "seed",
    "write_fixture_files",
]
