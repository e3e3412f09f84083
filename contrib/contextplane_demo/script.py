"""The scripted session: six turns covering every mode the projection must handle.

Two native turns, an incognito turn (no memory sections, no injection-log row), a goal turn
(no prior-session digest), a turn on a small model (16k tokens, so the budget forces
shedding) and a last native turn whose answer lives in another project's scope.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class Turn:
    """One scripted turn: the query, the working state, the mode flags and the model's window."""

    label: str
    query: str
    state: dict[str, Any] = attrs.field(factory=dict)
    incognito: bool = False
    goal_turn: bool = False
    context_window: int = 200_000


TURNS = [
    Turn(
        "1 native",
        "When is the website deploy window, and who approves a deploy?",
        {
            "goal": "Ship the checkout redesign",
            "status": "in progress",
            "plan": [
                "Freeze the feature branch",
                {"title": "Run the canary", "done": False},
                "Deploy in the Tuesday window",
            ],
            "tasks": ["Ask Priya to approve the deploy", "Update the status page"],
        },
    ),
    Turn(
        "2 native",
        "Which database migration tool did we settle on?",
        {
            "goal": "Ship the checkout redesign",
            "status": "canary running",
            "tasks": ["Check replica lag during the canary"],
            "watches": ["p95 checkout latency < 400 ms"],
        },
    ),
    Turn(
        "3 incognito",
        "Draft a private note about my own salary negotiation.",
        {"goal": "Private note"},
        incognito=True,
    ),
    Turn(
        "4 goal turn",
        "Continue the goal: finish the canary and deploy.",
        {
            "goal": "Ship the checkout redesign",
            "status": "canary green",
            "schedules": [{"title": "Deploy window", "when": "Tuesday 14:00 UTC"}],
        },
        goal_turn=True,
    ),
    Turn(
        "5 small model",
        "When is the website deploy window?",
        {"goal": "Ship the checkout redesign", "status": "deploying"},
        context_window=16_000,
    ),
    Turn("6 native", "What is the payments API key rotation policy?", {"goal": "Security review"}),
]
