"""The runtime requirements: what an adapter wiring contextplane into an agent framework must show
on a real conversation with the framework's own test model (ADR D1, D2, D8).

Why a table apart from the stores': a runtime adapter's author reads these and no other; ids and
sentences are the published contract (docs/conformance.md), never edited in meaning.
``contextplane.testing.requirements`` turns the entries into ``Requirement`` objects.
"""

from __future__ import annotations

from typing import Final

from contextplane.testing.requirement_entry import Entry

RUNTIME: Final[tuple[Entry, ...]] = (
    Entry(
        "RUNTIME-PROJECTION-SEEN",
        "runtime",
        "Every model call of a turn sees that turn's projected context, outside the system prompt, "
        "and no other turn's.",
    ),
    Entry(
        "RUNTIME-NEVER-STORED",
        "runtime",
        "The projected context is delivered for the request only: after every turn, nothing of it "
        "is in what the framework stores (history, session, checkpoint), which still holds the "
        "conversation itself.",
    ),
    Entry(
        "RUNTIME-ONE-COMPOSE-PER-TURN",
        "runtime",
        "Each turn is composed exactly once, with the turn's own session, operator input and an "
        "increasing turn index, however many model calls (tool rounds) the turn makes.",
    ),
    Entry(
        "RUNTIME-RECOMPOSE-ON-RESUME",
        "runtime",
        "A turn resumed or retried after it paused is composed exactly once more, for the same "
        "session, turn index and operator input, and the resumed model calls see that projection.",
        "resume",
    ),
    Entry(
        "RUNTIME-ONE-INJECTION-ROW",
        "runtime",
        "Every composition writes exactly one injection-log row for its session and turn, listing "
        "what it delivered, and every composed turn has its turn inputs where the snapshot store keeps "
        "them; a model call writes none.",
    ),
    Entry(
        "RUNTIME-SNAPSHOT-PER-CALL",
        "runtime",
        "Every model call writes exactly one prompt snapshot, keyed by the session, the turn index "
        "and the call's index within the turn counted from 0.",
    ),
    Entry(
        "RUNTIME-INCOGNITO-WRITES-NOTHING",
        "runtime",
        "An incognito turn is composed as incognito: the model sees no memory-carrying section, and "
        "the turn writes no injection-log row, no turn inputs, no memory and no snapshot carrying "
        "the projection's hash or text.",
        "incognito",
    ),
    Entry(
        "RUNTIME-GOAL-TURN",
        "runtime",
        "A goal turn is composed as a goal turn: the sections suppressed on goal turns are absent "
        "from what the model sees on it, and present on an ordinary turn.",
        "goal_turn",
    ),
    Entry(
        "RUNTIME-TOOL-PAIRS-INTACT",
        "runtime",
        "In every model call, each assistant tool call is followed directly by its tool results, in "
        "the order of the calls: the projection never splits or reorders a tool-call/result pair.",
        "tools",
    ),
    Entry(
        "RUNTIME-PREFIX-STABLE",
        "runtime",
        "Across turns whose prefix inputs did not change, the system prompt the model sees is "
        "byte-identical, holds no projected context, and every snapshot records the same prefix "
        "hash; the history before the projection only grows, so each call's is a prefix of the next.",
    ),
)
