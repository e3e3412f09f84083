"""Why a memory was (or was not) used, and whether a recorded turn replays byte for byte.

``explain`` answers, for one memory and one turn, with exactly one verdict and its evidence
(``explain.verdict``); ``replay`` recomposes a recorded turn from its recorded inputs against
the store as of that turn and compares it with what was delivered (``explain.replay``). Both
read a past turn through ``explain.turns``. The ``explain`` and ``replay`` commands are in
``explain.cli``.
"""

from contextplane.explain.replay import ReplayReport, SectionDiff, replay
from contextplane.explain.turns import TurnNotRecorded
from contextplane.explain.verdict import Verdict, explain

__all__ = ["ReplayReport", "SectionDiff", "TurnNotRecorded", "Verdict", "explain", "replay"]
