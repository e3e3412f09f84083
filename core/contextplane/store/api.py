"""The caller-facing memory API: what an agent tool or runtime adapter calls.

It adds the two rules a raw store cannot know: an incognito turn must write nothing
(ADR D6 / 0069 D3b), and recall hides superseded rows unless the caller asks for the
audit trail (D7).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from contextplane.errors import IncognitoWriteError, ValidationError
from contextplane.store.aio import aadd_chunk, asearch
from contextplane.store.protocol import KnowledgeStore, SearchHit

_INCOGNITO = (
    "memory_ingest: this turn is incognito, so nothing may be written to the memory store; "
    "drop the write or leave incognito mode"
)


def check_write_size(content: str, limit: int, setting: str = "store.max_write_chars") -> None:
    """Refuse a write whose text is longer than ``limit`` chars (0: no bound), naming its size
    and the setting: a 14 MB paste or a runaway tool call should be a clear error, not a row
    every later recall returns whole."""
    if limit and isinstance(content, str) and len(content) > limit:
        raise ValidationError(
            f"content: {len(content):,} chars, over the {limit:,}-char limit for one memory "
            f"({setting}); split it into smaller memories, or raise {setting}"
        )


def memory_ingest(
    store: KnowledgeStore,
    content: str,
    *,
    incognito: bool = False,
    expires_in_days: int | None = None,
    **attrs: Any,
) -> str:
    """Write one memory through ``store.add_chunk`` and return its id: on the embedded store a
    ``WriteOutcome`` (a ``str``) that also says what consolidation did (a duplicate returns the
    existing id; a same-subject write supersedes; near duplicates are reported).

    ``attrs`` are the other ``add_chunk`` keywords (domain, source_type, memory_kind,
    delivery_policy, review_state, namespace, heading, source, subject, epoch, expires_at).
    Raises ``IncognitoWriteError`` before touching the store when ``incognito`` is true."""
    if incognito:
        raise IncognitoWriteError(_INCOGNITO)
    return store.add_chunk(content, expires_in_days=expires_in_days, **attrs)


def memory_recall(
    store: KnowledgeStore,
    query: str,
    k: int = 5,
    *,
    include_superseded: bool = False,
    namespaces: Sequence[str] | None = None,
    now: datetime | None = None,
) -> list[SearchHit]:
    """Deliverable memories relevant to ``query``, best first. Superseded rows appear only with
    ``include_superseded=True`` (rejected and expired rows never do). ``namespaces`` is the
    scope allow-list, e.g. ``["", "project:a", "session:x"]``; ``None`` searches every scope."""
    return store.search(
        query, k, deliverable=True, namespaces=namespaces, include_superseded=include_superseded, now=now
    )


async def amemory_ingest(
    store: KnowledgeStore,
    content: str,
    *,
    incognito: bool = False,
    expires_in_days: int | None = None,
    **attrs: Any,
) -> str:
    """``memory_ingest`` without blocking an event loop (``contextplane.store.aio``)."""
    if incognito:
        raise IncognitoWriteError(_INCOGNITO)
    return await aadd_chunk(store, content, expires_in_days=expires_in_days, **attrs)


async def amemory_recall(
    store: KnowledgeStore,
    query: str,
    k: int = 5,
    *,
    include_superseded: bool = False,
    namespaces: Sequence[str] | None = None,
    now: datetime | None = None,
) -> list[SearchHit]:
    """``memory_recall`` without blocking an event loop (``contextplane.store.aio``)."""
    options = {"namespaces": namespaces, "include_superseded": include_superseded, "now": now}
    return await asearch(store, query, k, deliverable=True, **options)
