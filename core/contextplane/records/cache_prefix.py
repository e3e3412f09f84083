"""The cacheable prefix of a model call (ADR D1/D2, issue 24): what a provider's prompt cache
can reuse from the previous call of the same session.

The stable prefix comes first, then the session history, then the per-request projection, so
everything before the projection (prefix text + the history messages as delivered) is a prefix
a provider may cache (Anthropic ``cache_control`` blocks, OpenAI automatic prefix caching). A
snapshot records that prefix's hash (over the stable prefix's hash and each message's), its
length, and how much of it the previous call of the session shared, so an operator sees when
something volatile broke the cache: a prefix section whose text changed (named), or history
rewritten at a given message.

The comparison is done at record time against the previous call recorded for the session
into the same backend by any runtime of the process (``tracker_of``: a runtime rebuilt with an
edited SOUL.md or another tool set names the changed section), kept in memory (its prefix
text, section hashes and per-message hashes), bounded to the most recently active sessions. A
call whose predecessor is not in memory (a process restart, or an evicted session) records the
share as unknown rather than guessing.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import attrs

#: (sha256 digest of a history message as delivered (role, text and tool-call key), its chars)
MessageDigest = tuple[bytes, int]


@attrs.frozen
class CachePrefix:
    """One call's cacheable prefix figures, as stored on its snapshot.

    ``shared`` is None when the previous call is unknown (the process started after it);
    ``first`` marks a session's first call (nothing to share). ``sections`` names the prefix
    sections whose hash changed since the previous call; ``history_at`` is the first history
    message (0-based) that differs from the previous call's."""

    sha256: str | None
    chars: int
    shared: int | None
    first: bool = False
    sections: tuple[str, ...] = ()
    history_at: int | None = None

    @property
    def unchanged(self) -> bool:
        """Nothing broke the previous call's prefix: all of it is reused by this call."""
        return self.shared is not None and not self.first and not self.sections and self.history_at is None

    def break_json(self) -> str | None:
        """The storage form of what broke (or did not apply to) the share; None: nothing did."""
        if self.first:
            return '{"first":true}'
        if self.shared is None:
            return '{"unknown":true}'
        if self.sections:
            return json.dumps({"sections": list(self.sections)}, separators=(",", ":"))
        if self.history_at is not None:
            return json.dumps({"history_at": self.history_at}, separators=(",", ":"))
        return None

    @classmethod
    def of_row(
        cls, sha256: str | None, chars: int | None, shared: int | None, broken: str | None
    ) -> CachePrefix | None:
        """The figures of a stored row; None for a row written before they were recorded."""
        if chars is None:
            return None
        data = json.loads(broken) if broken else {}
        return cls(
            sha256,
            int(chars),
            None if shared is None else int(shared),
            first=bool(data.get("first", False)),
            sections=tuple(data.get("sections", ())),
            history_at=data.get("history_at"),
        )

    def line(self) -> str:
        """What ``contextplane snapshots`` and the console's inspector print for the call."""
        head = f"cacheable prefix: {self.chars} chars"
        if self.first:
            return f"{head}, the session's first call"
        if self.shared is None:
            return f"{head}, share with the previous call unknown (not seen by this process)"
        if self.unchanged:
            return f"{head}, unchanged since the previous call"
        shared = f"{head}, {self.shared} shared with the previous call"
        if self.sections:
            return f"{shared}; broken by section " + ", ".join(f"'{s}'" for s in self.sections)
        return f"{shared}; history rewritten at message {self.history_at}"


@attrs.frozen
class _Seen:
    """What the tracker keeps of a session's previous call."""

    prefix_text: str
    sections: tuple[tuple[str, str], ...]
    messages: tuple[MessageDigest, ...]
    chars: int


def message_digest(role: str, text: str, key: str = "") -> MessageDigest:
    """A history message as delivered: its role, text and ``key`` hashed, and its length in
    chars (of its text). ``key`` is what else of the message the provider receives that a
    rewrite could change without touching the text: tool-call ids, names and arguments,
    tool-result ids (``delivery.tool_key``); without it such a rewrite goes undetected."""
    return hashlib.sha256(f"{role}\0{text}\0{key}".encode()).digest(), len(text)


def prefix_sha256(prefix_sha: str, messages: Sequence[MessageDigest]) -> str:
    """The cacheable prefix's hash: over the stable prefix's hash and each message's digest,
    in order (one hash per call, over 32 bytes a message)."""
    return hashlib.sha256(prefix_sha.encode() + b"".join(d for d, _chars in messages)).hexdigest()


def _common_chars(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _broken_sections(
    before: tuple[tuple[str, str], ...], now: tuple[tuple[str, str], ...]
) -> tuple[str, ...]:
    """The prefix sections whose hash changed, appeared or went away (an order change names
    the first section out of place)."""
    was = dict(before)
    is_ = dict(now)
    changed = [name for name, sha in now if was.get(name) != sha]
    changed += [name for name, _ in before if name not in is_]
    if not changed:
        changed = [a[0] if a[0] else b[0] for a, b in zip(now, before, strict=False) if a != b][:1] or [
            "(prefix text)"
        ]
    return tuple(dict.fromkeys(changed))


class CacheTracker:
    """The previous call of each recently active session, and the figures of the next.

    ``max_sessions`` bounds memory: the least recently recorded sessions are forgotten (their
    next call then records the share as unknown)."""

    def __init__(self, max_sessions: int = 4096) -> None:
        self.max_sessions = max_sessions
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def observe(
        self,
        session_id: str,
        *,
        first_call: bool,
        prefix_text: str,
        prefix_sha: str,
        sections: Sequence[tuple[str, str]],
        messages: Sequence[MessageDigest],
        incognito: bool = False,
    ) -> CachePrefix:
        """This call's figures, compared with the session's previous call; then remember it.
        ``first_call``: the call opens its session (nothing before it to share), which reads as
        the first call rather than an unknown share when no previous call is in memory. Incognito calls get
        no hash (it would fingerprint their history) but are compared and remembered."""
        now = _Seen(
            prefix_text,
            tuple(sections),
            tuple(messages),
            len(prefix_text) + sum(chars for _sha, chars in messages),
        )
        sha = None if incognito else prefix_sha256(prefix_sha, now.messages)
        with self._lock:
            before = self._seen.pop(session_id, None)
            self._seen[session_id] = now
            while len(self._seen) > self.max_sessions:
                self._seen.popitem(last=False)
        if before is None:
            if first_call:
                return CachePrefix(sha, now.chars, 0, first=True)
            return CachePrefix(sha, now.chars, None)
        if before.prefix_text != prefix_text:
            return CachePrefix(
                sha,
                now.chars,
                _common_chars(before.prefix_text, prefix_text),
                sections=_broken_sections(before.sections, now.sections),
            )
        shared = len(prefix_text)
        for i, (old, new) in enumerate(zip(before.messages, now.messages, strict=False)):
            if old != new:
                return CachePrefix(sha, now.chars, shared, history_at=i)
            shared += new[1]
        if len(now.messages) < len(before.messages):  # history cut short: rewritten at its end
            return CachePrefix(sha, now.chars, shared, history_at=len(now.messages))
        return CachePrefix(sha, now.chars, shared)


_trackers: weakref.WeakKeyDictionary[Any, CacheTracker] = weakref.WeakKeyDictionary()
#: Backends that cannot be weakly referenced, with their trackers, found by identity (``is``).
_unhashable: list[tuple[Any, CacheTracker]] = []
_trackers_lock = threading.Lock()


def tracker_of(backend: Any) -> CacheTracker:
    """The tracker of every runtime recording into ``backend`` in this process: a session's
    previous call is the one recorded into that backend, whichever runtime recorded it, so a
    runtime rebuilt with a changed prefix section reports the section by name instead of an
    unknown share. Forgotten with the backend (kept for the process when it cannot be weakly
    referenced)."""
    with _trackers_lock:
        try:
            found = _trackers.get(backend)
            if found is None:
                found = _trackers[backend] = CacheTracker()
        except TypeError:  # unhashable or not weak-referenceable
            found = next((held for owner, held in _unhashable if owner is backend), None)
            if found is None:
                found = CacheTracker()
                _unhashable.append((backend, found))
    return found
