"""Warnings that fire once per distinct cause, not once per turn.

A runtime composes a projection on every request; a warning that repeats on each one is noise
that hides the next real warning. Each notice carries a key; the same key warns once per
process until ``reset_notices()``.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Hashable


class ContextPlaneWarning(UserWarning):
    """Base class of the warnings contextplane emits."""


class BudgetWarning(ContextPlaneWarning):
    """The budget is unbounded by accident, or never-shed sections alone exceed it."""


class PluginWarning(ContextPlaneWarning):
    """A plugin or one of its inputs was skipped (e.g. a malformed SKILL.md)."""


class ConfigWarning(ContextPlaneWarning):
    """A configuration key is deprecated or read differently than it was written."""


class StoreWarning(ContextPlaneWarning):
    """The store runs degraded (e.g. sqlite-vec unavailable, FTS only)."""


_seen: set[Hashable] = set()
_lock = threading.Lock()


def warn_once(key: Hashable, message: str, category: type[Warning] = ContextPlaneWarning) -> bool:
    """Emit ``message`` unless ``key`` already warned; returns True when it was emitted."""
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    warnings.warn(message, category, stacklevel=3)
    return True


def reset_notices() -> None:
    """Forget which notices were emitted (tests; long-lived processes after a config reload)."""
    with _lock:
        _seen.clear()


def log_once(logger: logging.Logger, key: Hashable, level: int, message: str, *args: object) -> bool:
    """Log ``message`` at ``level`` unless ``key`` already logged (same memory as ``warn_once``)."""
    with _lock:
        if ("log", key) in _seen:
            return False
        _seen.add(("log", key))
    logger.log(level, message, *args)
    return True


def log_failure(
    logger: logging.Logger, key: Hashable, message: str, *args: object, exc: BaseException
) -> bool:
    """Log an isolated failure once per distinct ``key`` at WARNING, with its traceback.

    A provider that raises on every turn logs once, not once per turn; a different failure of
    the same provider (another message) logs again."""
    with _lock:
        if ("failure", key) in _seen:
            return False
        _seen.add(("failure", key))
    logger.warning(message, *args, exc_info=(type(exc), exc, exc.__traceback__))
    return True
