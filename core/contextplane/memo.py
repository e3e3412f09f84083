"""Bounded memos for the hot path of composition, and the one switch that clears them all.

Most rows recur turn after turn (the skills index, always-on memories, the digest within its
TTL), so escaping and measuring a row's text is memoised. Each memo is a plain ``dict`` (the
lookup stays a dict lookup) that its owner clears whole when it reaches ``MEMO_LIMIT``, which
keeps it cheap and its memory bounded. Why a module of its own: the memos belong to different
modules (``escaping`` owns the escaped text, ``fitting`` the measured line), and clearing them
together must not make those modules import each other.
"""

from __future__ import annotations

import threading
from typing import Any, Final

#: Entries a memo holds before it is cleared whole.
MEMO_LIMIT: Final[int] = 8192

_memos: list[dict[Any, Any]] = []
_lock = threading.Lock()


def new_memo() -> dict[Any, Any]:
    """A new, empty memo that ``clear_memos`` clears."""
    memo: dict[Any, Any] = {}
    with _lock:
        _memos.append(memo)
    return memo


def clear_memos() -> None:
    """Empty every memo (benchmarks measure the cold path this way)."""
    with _lock:
        for memo in _memos:
            memo.clear()
