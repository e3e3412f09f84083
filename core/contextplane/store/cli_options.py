"""What a ``contextplane memory`` command reads before it opens anything: the shared options
(``--config``/``--db``, ``--json``, the write attributes, the event-time window) and the
memory's text (an argument, standard input or ``--file``), checked and bounded.

Why apart from the commands: every writing command takes the same attributes and the same text,
and each check (UTF-8, ``store.max_write_chars``, a known ``--source-type``, a well-formed window)
must run before the store is opened, so bad input never creates, migrates or changes a store;
one home keeps the add and supersede paths from drifting apart.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from contextplane.cli_common import (
    command_backend,
    config_option,
    db_option,
    load,
)
from contextplane.cli_params import STORE_INT_MAX, Whole
from contextplane.errors import ValidationError
from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
    parse_occurred_at,
    parse_timestamp,
    validate_text,
)
from contextplane.memory.trust import SOURCE_TYPE_TIERS
from contextplane.plugins import PluginHost
from contextplane.store.api import check_write_size

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("contextplane.cli")


#: Days of an expiry: any whole number a store holds; the model says which are allowed.
DAYS = Whole(-STORE_INT_MAX - 1)


def _json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def _store_options(func: F) -> F:
    return config_option(db_option(func))


@contextlib.contextmanager
def _open(
    config_path: str | None,
    db: Path | None,
    *,
    write: bool,
    create: bool = False,
    host: PluginHost | None = None,
) -> Iterator[Any]:
    """The memory store of the backend a runtime with this configuration opens; only a
    command that adds memories (``create``) makes a new store, the others refuse a path with
    none (a typo must not curate an empty store)."""
    with command_backend(config_path, db, write=write, create=create, host=host) as (_config, _host, backend):
        yield backend.memories


_write_options: list[Callable[[F], F]] = [
    click.option("--domain", default=None, help="Legacy domain (kept for compatibility; 'hot' = always)."),
    click.option(
        "--source-type",
        default="manual",
        show_default=True,
        help=f"Provenance, matched exactly (sets the trust tier): {', '.join(sorted(SOURCE_TYPE_TIERS))}.",
    ),
    click.option("--kind", "memory_kind", type=click.Choice(sorted(MEMORY_KINDS)), default=None),
    click.option("--policy", "delivery_policy", type=click.Choice(sorted(DELIVERY_POLICIES)), default=None),
    click.option("--review-state", type=click.Choice(sorted(REVIEW_STATES)), default=None),
    click.option("--namespace", default=None, help="Scope: '' global, project:<id> or session:<id>."),
    click.option("--heading", default=None),
    click.option("--source", default=None),
    click.option("--subject", default=None),
    click.option("--epoch", default=None),
    click.option("--expires-at", default=None, help="ISO-8601 time with offset, e.g. 2027-01-31T00:00:00Z."),
    click.option("--expires-in-days", type=DAYS, default=None, help="1..3650 days from now."),
    click.option(
        "--occurred-at",
        default=None,
        help="When what it describes happened (event time, not write time): ISO-8601 with offset.",
    ),
]


def _with_write_options(func: F) -> F:
    for option in reversed(_write_options):
        func = option(func)
    return func


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _checked_source_type(values: dict[str, Any]) -> dict[str, Any]:
    """Warn (once per command) when ``--source-type`` names no known provenance: it is matched
    exactly, and an unknown one silently gets the least trust."""
    source = values.get("source_type")
    if isinstance(source, str) and source not in SOURCE_TYPE_TIERS:
        known = sorted(SOURCE_TYPE_TIERS)
        near = [k for k in known if k == source.strip().lower()] or difflib.get_close_matches(
            source.lower(), known, n=1
        )
        hint = f"; did you mean {near[0]!r}?" if near else ""
        log.warning(
            "--source-type %r is not a known provenance (it is matched exactly), so the memory gets "
            "the least trust: tier 1, pending review%s (known: %s)",
            source,
            hint,
            ", ".join(known),
        )
    return values


def _content(content: str | None, file: Path | None, limit: int = 0) -> str:
    """The memory's text: the argument, standard input for ``-``, or ``--file``; UTF-8 only and
    at most ``limit`` chars (``store.max_write_chars``; 0: no bound), checked before the store
    is opened, so bad text never even creates one. A file or standard input is read only up to
    what the limit could hold, so a 50 MB paste is refused without being read whole."""
    text = validate_text(_raw_content(content, file, limit), "content", allow_empty=False)
    check_write_size(text, limit)
    return text


def _raw_content(content: str | None, file: Path | None, limit: int = 0) -> str:
    if content is not None and file is not None:
        raise ValidationError("content: give the text as an argument or with --file, not both")
    # A char is at most 4 bytes of UTF-8: more bytes than that cannot be within the limit.
    cap = 4 * limit if limit else -1
    if file is not None:
        return _decode(_bounded(_read_bytes(file, cap), cap, str(file), limit), str(file))
    if content is None:
        raise ValidationError(
            "content: missing; give the memory's text as an argument, '-' to read standard input, "
            "or --file PATH"
        )
    if content == "-":
        data = sys.stdin.buffer.read(cap + 1 if limit else -1)
        # ``echo text | contextplane memory add -`` means the text, not the text and echo's newline.
        return _strip_one_newline(_decode(_bounded(data, cap, "standard input", limit), "standard input"))
    return content


def _strip_one_newline(text: str) -> str:
    for end in ("\r\n", "\n"):
        if text.endswith(end):
            return text[: -len(end)]
    return text


def _bounded(data: bytes, cap: int, where: str, limit: int) -> bytes:
    if cap >= 0 and len(data) > cap:
        raise ValidationError(
            f"content: {where} holds more than {cap:,} bytes, over the {limit:,}-char limit for "
            "one memory (store.max_write_chars); split it into smaller memories, or raise "
            "store.max_write_chars"
        )
    return data


def _read_bytes(file: Path, cap: int = -1) -> bytes:
    try:
        with file.open("rb") as handle:
            return handle.read(cap + 1 if cap >= 0 else -1)
    except OSError as exc:
        raise ValidationError(f"--file {file}: cannot read it ({exc.strerror})") from None


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"content: {where} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "convert it to UTF-8 first"
        ) from None


def _event_window_options(func: F) -> F:
    """``--occurred-after`` / ``--occurred-before``: the event-time window of list and search."""
    func = click.option(
        "--occurred-before", default=None, help="Only memories whose event time is before this (ISO-8601)."
    )(func)
    return click.option(
        "--occurred-after",
        default=None,
        help="Only memories whose event time is at or after this (ISO-8601).",
    )(func)


def _event_window(window: dict[str, Any]) -> dict[str, Any]:
    """The window's bounds, checked before the store is opened (a bad one opens nothing)."""
    return {k: parse_timestamp(v, k) for k, v in window.items() if v is not None}


_file_option = click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the memory's text from this UTF-8 file.",
)


def _text_write_options(func: F) -> F:
    """What a command that writes a memory's text takes: CONTENT (or ``-``, or ``--file``), the
    write attributes, ``--config``/``--db`` and ``--json``, in that order. ``add`` and
    ``supersede`` share it, so their options cannot drift apart."""
    for option in (_json_option, _store_options, _with_write_options, _file_option):
        func = option(func)
    return click.argument("content", required=False)(func)


def _write_input(
    config_path: str | None, content: str | None, file: Path | None, attrs: dict[str, Any]
) -> tuple[PluginHost, str, dict[str, Any]]:
    """The host, the memory's text and its attributes for a write, every one checked before the
    store is opened (bad input never creates or changes a store)."""
    config, host = load(config_path)
    text = _content(content, file, config.store.max_write_chars)
    values = _checked_source_type(_given(**attrs))
    if "occurred_at" in values:
        values["occurred_at"] = parse_occurred_at(values["occurred_at"])
    return host, text, values
