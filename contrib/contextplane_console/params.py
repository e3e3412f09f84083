"""Reading request input: query parameters, form fields and JSON bodies, each refused by name.

Every reader takes a plain mapping of text (a query string or a form) or a decoded JSON object,
so the pages and the JSON API accept the same values and refuse the same ones with the same
message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from contextplane_console.errors import Refusal, refuse

#: The words a filter accepts for "no filter", besides leaving the parameter out.
ANY = frozenset({"", "any"})

#: Largest request body the console reads (a memory's new text fits many times over).
MAX_BODY_BYTES = 1 << 20


def choice(params: Mapping[str, str], name: str, allowed: Iterable[str]) -> str | None:
    """One of ``allowed``, or None when the parameter is absent, empty or ``any``."""
    value = params.get(name)
    if value is None or value.strip() in ANY:
        return None
    options = sorted(allowed)
    if value not in options:
        raise refuse(name, f"{value!r} is not one of {', '.join(options)} (or 'any')")
    return value


def whole(
    params: Mapping[str, str], name: str, *, default: int | None, lo: int, hi: int | None = None
) -> int | None:
    """A whole number in ``[lo, hi]``; ``default`` when absent or empty."""
    raw = params.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip()
    span = f"from {lo} to {hi}" if hi is not None else f">= {lo}"
    if not (text.isdigit() or (text.startswith("-") and text[1:].isdigit())):
        raise refuse(name, f"expected a whole number {span}, got {raw!r}")
    value = int(text)
    if value < lo or (hi is not None and value > hi):
        raise refuse(name, f"expected a whole number {span}, got {value}")
    return value


def required_text(params: Mapping[str, str], name: str, what: str) -> str:
    value = params.get(name)
    if value is None or not value.strip():
        raise refuse(name, f"required: {what}")
    return value


def checkbox(params: Mapping[str, str], name: str) -> bool:
    """An HTML checkbox: present (any value but ``false``/``0``/``off``) means checked."""
    value = params.get(name)
    return value is not None and value.strip().lower() not in {"false", "0", "off"}


def json_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a refusal naming ``body``."""
    if not body.strip():
        raise refuse("body", "empty; send a JSON object")
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise refuse("body", f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise refuse("body", f"expected a JSON object, got {type(value).__name__}")
    return value


def only_fields(obj: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Refuse keys the endpoint does not read: a typo must not be silently ignored."""
    known = set(allowed)
    extra = sorted(set(obj) - known)
    if extra:
        raise Refusal(
            extra[0],
            f"{extra[0]}: unknown field; this endpoint reads {', '.join(sorted(known))}",
        )


def json_bool(obj: Mapping[str, Any], name: str, default: bool = False) -> bool:
    value = obj.get(name, default)
    if not isinstance(value, bool):
        raise refuse(name, f"expected true or false, got {value!r}")
    return value


def json_int(obj: Mapping[str, Any], name: str, *, lo: int) -> int | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise refuse(name, f"expected a whole number >= {lo} or null, got {value!r}")
    return value


def json_text(obj: Mapping[str, Any], name: str, *, default: str | None = None) -> str | None:
    value = obj.get(name, default)
    if value is None:
        return None
    if not isinstance(value, str):
        raise refuse(name, f"expected text, got {type(value).__name__}")
    return value
