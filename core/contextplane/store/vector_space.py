"""The store's vector space: which embedder (provider and model, its ``name``) and how many
dimensions made the vectors a store holds. Both backends record it when vectors are first
attached and refuse to mix: a vector from another model is not comparable even at the same
width (crewAI#2464 is what a silent mix looks like). The fix is always the same command.
"""

from __future__ import annotations

from contextplane.errors import VectorSpaceError

REBUILD = "contextplane memory reindex --rebuild"


def describe(name: str | None, dims: int | str | None) -> str:
    return f"{name!r} ({dims} dimensions)"


def check(where: str, stored_name: str | None, stored_dims: int | str | None, name: str, dims: int) -> None:
    """Raise ``VectorSpaceError`` when the recorded space is not ``(name, dims)``; nothing is
    recorded yet (``stored_dims`` None) passes."""
    if stored_dims is None:
        return
    if int(stored_dims) != dims:
        raise VectorSpaceError(
            f"{where}: stored vectors have {stored_dims} dimensions from embedder {stored_name!r}, but the "
            f"configured embedder {name!r} produces {dims}; vectors of two embedders cannot be compared: "
            f"run `{REBUILD}` to embed every memory again with the configured one, or configure "
            f"{stored_name!r} again"
        )
    if stored_name is not None and stored_name != name:
        raise VectorSpaceError(
            f"{where}: stored vectors are from embedder {describe(stored_name, stored_dims)}, but the "
            f"configured embedder is {describe(name, dims)}; vectors of two models cannot be compared "
            f"even at the same width: run `{REBUILD}` to embed every memory again with the configured "
            f"one, or configure {stored_name!r} again"
        )
