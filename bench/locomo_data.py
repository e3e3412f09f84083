"""LoCoMo, read in place: turns and questions of ``../shared/data/locomo-dev.json.gz``.

The data is not the project's to ship (CC BY-NC 4.0; see /work/shared/data/README.md): it is read
from the shared directory beside the repository, never copied into it. A turn becomes one memory;
its text is what a runtime writing a chat log would store: ``"Speaker: text"``, and when the turn
shared a photo, the photo's caption after it (``" [shared a photo: <blip_caption>]"``): the
caption is often the only place the answer is (questions about what a painting showed).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo-dev.json.gz"

#: LoCoMo's category numbers as the papers that use the released file read them.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DIA_ID = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"session_(\d+)$")


@attrs.frozen
class Turn:
    conversation: str
    dia_id: str
    session: int
    #: When the turn was said (its session's date), UTC; None if the date does not parse.
    said_at: datetime | None
    content: str


@attrs.frozen
class Question:
    conversation: str
    index: int
    text: str
    category: int
    #: The ``dia_id``s of the turns that answer it, those naming no turn dropped.
    evidence: tuple[str, ...]


@attrs.frozen
class Conversation:
    id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    #: Evidence ids that name no turn of the conversation (skipped).
    unknown_evidence: int


def session_date(text: str) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime (the data names no time zone)."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def turn_content(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    return f"{text} [shared a photo: {caption}]" if caption else text


def evidence_ids(raw: Sequence[str], known: set[str]) -> tuple[list[str], int]:
    """The turn ids an evidence list names, and how many it names that are no turn. A few
    entries hold several ids in one string ("D8:6; D9:17"): each is taken."""
    found: list[str] = []
    unknown = 0
    for entry in raw:
        ids = _DIA_ID.findall(entry)
        unknown += not ids
        for dia in ids:
            if dia in known and dia not in found:
                found.append(dia)
            elif dia not in known:
                unknown += 1
    return found, unknown


def parse(record: dict[str, Any]) -> Conversation:
    conv_id = record["sample_id"]
    conv = record["conversation"]
    turns: list[Turn] = []
    for key, value in conv.items():
        match = _SESSION.match(key)
        if not match or not isinstance(value, list):
            continue
        when = session_date(conv.get(f"{key}_date_time", ""))
        session = int(match.group(1))
        turns.extend(Turn(conv_id, t["dia_id"], session, when, turn_content(t)) for t in value)
    known = {t.dia_id for t in turns}
    questions: list[Question] = []
    unknown = 0
    for i, qa in enumerate(record["qa"]):
        found, missing = evidence_ids(qa.get("evidence", []), known)
        unknown += missing
        questions.append(Question(conv_id, i, qa["question"], int(qa["category"]), tuple(found)))
    return Conversation(conv_id, tuple(turns), tuple(questions), unknown)


def load(path: Path = DATA) -> list[Conversation]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [parse(record) for record in json.load(handle)]


#: Questions none of the conversations can answer (software, finance, repairs: topics the five
#: conversations never touch), in the data's question style. Composed in every conversation's
#: scope, they should inject nothing (the relevance rule's job); the bench prints which of their
#: words occur in the conversations at all.
OFF_CORPUS = (
    "How do I roll back the kubernetes ingress after a failed deploy?",
    "What causes the mutex deadlock in the postgres connection pool?",
    "Which terraform module sets the subnet for the docker cluster?",
    "Where is the TLS certificate for the API endpoint stored?",
    "Why does the compiler segfault on the bytecode parser?",
    "What is the quarterly payroll tax audit schedule?",
    "How is the mortgage amortization computed in the spreadsheet?",
    "Which vendor handles procurement compliance for GDPR?",
    "What does the webhook send to the OAuth token endpoint?",
    "How big is the heap after garbage collector tuning?",
    "What firmware checksum does the router expect?",
    "How do I fix the regex in the YAML lexer?",
    "What is the DNS latency of the linux kernel resolver?",
    "What torque setting does the alternator bolt need?",
    "Which capacitor and resistor go on the transistor voltage divider?",
    "Which grout suits drywall near the plumbing?",
    "How does the microservice cache the SQL query index?",
    "What is the dividend depreciation on the fiscal ledger?",
    "How do I calibrate the oscilloscope probe for soldering work?",
    "What is the bandwidth cost of encryption during the schema migration?",
)
