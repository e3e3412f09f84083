"""Errors are part of the interface: each one names what was wrong and who must act.

Every exception the framework raises on purpose derives from ``ContextPlaneError`` so a
runtime can tell "the configuration or a plugin is wrong" from "our code is broken".
"""

from __future__ import annotations


class ContextPlaneError(Exception):
    """Base class for every error contextplane raises deliberately."""


class ConfigError(ContextPlaneError, ValueError):
    """Configuration could not be read or has an invalid value (the message names the key path)."""


class PluginLoadError(ContextPlaneError):
    """A plugin failed to import or validate; raised only in strict mode, recorded otherwise."""


class SectionOrderError(ContextPlaneError):
    """The stable-prefix sections cannot be ordered: unknown name, duplicate name or a cycle."""


class SectionError(ContextPlaneError):
    """A section provider failed while composing; raised only in strict mode, recorded otherwise."""


class StoreError(ContextPlaneError):
    """The knowledge store refused an operation or cannot be opened."""


class ValidationError(ContextPlaneError, ValueError):
    """A value handed to the framework is malformed; the message names the field."""


class IncognitoWriteError(ContextPlaneError):
    """A memory write was attempted from an incognito turn, which must write nothing (ADR D6/D3b)."""


class EmbedderError(StoreError):
    """The embedder could not turn texts into vectors (refused, timed out, answered wrongly).
    A write it was for is refused whole; a turn's search falls back to full text (the
    retrieved section says so). The message names the embedder and never holds a credential."""


class VectorSpaceError(StoreError):
    """The store's vectors were made by another embedder (model or dimensions) than the one
    configured; the message names both and the fix (``contextplane memory reindex --rebuild``)."""
