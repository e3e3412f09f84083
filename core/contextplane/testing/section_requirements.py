"""The section plugins' requirements: prompt sections (the stable prefix, ADR D3) and context
sections (the projected context, ADR D6), in documentation order.

Why a table apart from the store's: a section author reads these and no other; ids and
sentences are the published contract (docs/conformance.md), never edited in meaning.
``contextplane.testing.requirements`` turns the entries into ``Requirement`` objects.
"""

from __future__ import annotations

from typing import Final

from contextplane.testing.requirement_entry import Entry

PROMPT: Final[tuple[Entry, ...]] = (
    # --- prompt sections (stable prefix, ADR D3) -------------------------------------------
    Entry(
        "PROMPT-RENDERS",
        "prompt",
        "render(BuildContext) returns text (str) for the documented build context, without raising.",
    ),
    Entry(
        "PROMPT-UNIQUE-NAME",
        "prompt",
        "A prompt section's name is unique: no standard section, no companion plugin and no other "
        "section of the same plugin registers it.",
    ),
    Entry(
        "PROMPT-VALID-REFS",
        "prompt",
        "Every before/after name refers to a registered section (a standard one or a companion's), "
        "never to the section itself, and the constraints resolve without a cycle.",
    ),
    Entry(
        "PROMPT-POSITION",
        "prompt",
        "In the composed stable prefix the section comes after every section it names in `after` and "
        "before every section it names in `before`.",
    ),
    Entry(
        "PROMPT-DETERMINISTIC",
        "prompt",
        "Equal build contexts render equal text, in the same host and in a fresh one.",
    ),
    Entry(
        "PROMPT-NO-STATE-LEAK",
        "prompt",
        "Rendering for one build context leaves the text rendered for another build context unchanged.",
    ),
    Entry(
        "PROMPT-MAX-CHARS",
        "prompt",
        "The rendered text stays within the declared size (max_chars) for the documented build context.",
        capability="max_chars",
    ),
)

CONTEXT: Final[tuple[Entry, ...]] = (
    # --- context sections (projected context, ADR D6) --------------------------------------
    Entry(
        "CTX-DRAFT-VALID",
        "context",
        "draft(request) returns a Draft or an iterable of Row for the documented input, without "
        "raising and within context.provider_timeout_ms.",
    ),
    Entry(
        "CTX-UNIQUE-NAME",
        "context",
        "A context section's name is unique: no standard section, no companion plugin and no other "
        "section of the same plugin registers it.",
    ),
    Entry(
        "CTX-ENVELOPE-CONSISTENT",
        "context",
        "A section that shares an envelope tag with another section (a standard one included) declares "
        "the identical Envelope, so it composes beside every standard section.",
    ),
    Entry(
        "CTX-ROW-IDS-RANKS",
        "context",
        "Every row carries a non-empty id, unique within its draft, and a finite numeric rank "
        "(1 = most important, shed last).",
    ),
    Entry(
        "CTX-DETERMINISTIC",
        "context",
        "Equal requests give equal drafts (ids, ranks, text, short forms, order) and equal composed "
        "text, in the same host and in a fresh one.",
    ),
    Entry(
        "CTX-ASYNC-PARITY",
        "context",
        "The async composition (acompose_projected_context) gives every input the projection the sync "
        "one gives: the same text, section reports and shedding; adraft, when the section has one, "
        "drafts what draft drafts.",
    ),
    Entry(
        "CTX-SHED-ORDER",
        "context",
        "Under a shrinking budget the section gives up space as its declared shed behaviour says, least "
        "important first: rows the draft lists later (higher rank) go before rows it lists earlier, "
        "except that a row longer than the room left is shed alone and never takes smaller rows with "
        "it; DEGRADE shortens rows before dropping any and keeps its floor while the floor fits, "
        "DROP_SECTION goes whole, NEVER keeps every row; whatever can be shed is shed until the "
        "projection fits.",
    ),
    Entry(
        "CTX-MEMORY-FLAG",
        "context",
        "A section that reads the knowledge store declares carries_memory=True, so an incognito turn "
        "never calls it; a section that declares it delivers nothing under incognito.",
    ),
    Entry(
        "CTX-NO-BREAKOUT",
        "context",
        "Text from the section's data can never close or forge an envelope, smuggle a chat-template "
        "token, or start a line with a role marker: every tag in the composed text is one the layout "
        "put there.",
    ),
    Entry(
        "CTX-SESSION-ISOLATION",
        "context",
        "A draft depends only on its own request: composing session A, then session B, then A again "
        "gives A the same rows both times and B the same rows as in a fresh host.",
    ),
    Entry(
        "CTX-MAX-CHARS",
        "context",
        "With the documented input the section renders within its declared size (ContextSection.max_chars).",
        capability="max_chars",
    ),
)
