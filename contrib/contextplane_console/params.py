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

#: Deepest nesting of a JSON body: no endpoint reads more than two levels, and Python's parser
#: (and everything after it) recurses, so 200,000 levels must be refused, not crash a worker.
MAX_JSON_DEPTH = 32

#: The largest whole number the stores can hold or compare (signed 64 bits): a larger turn,
#: offset or limit names nothing and must not reach the driver.
MAX_WHOLE = 2**63 - 1


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
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 40:
        raise refuse(name, f"expected a whole number {span}, got {_short(raw)!r}")
    value = int(text)
    if value < lo or (hi is not None and value > hi):
        raise refuse(name, f"expected a whole number {span}, got {value}")
    if value > MAX_WHOLE:
        raise refuse(name, f"expected a whole number {span} and at most {MAX_WHOLE}, got {_short(text)}")
    return value


def _short(text: str) -> str:
    """A bad value, cut so a 100,000-digit number makes a short error message."""
    return text if len(text) <= 40 else text[:37] + "..."


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
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise refuse("body", f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise refuse("body", f"expected a JSON object, got {type(value).__name__}")
    _check_tree(value)
    return value


def _check_tree(value: object) -> None:
    """Refuse nesting past ``MAX_JSON_DEPTH`` and text that is not Unicode: JSON's ``\\ud800``
    escape decodes to a lone surrogate, which no store, page or response can encode. Walked
    with a stack, not recursion, for the same reason the depth is capped."""
    stack: list[tuple[object, int, str]] = [(value, 1, "body")]
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, dict):
            for key, inner in item.items():
                _check_text(key, where)
                stack.append((inner, depth + 1, key if where == "body" else where))
        elif isinstance(item, list):
            stack.extend((inner, depth + 1, where) for inner in item)


def _too_deep() -> Refusal:
    return refuse("body", f"nested too deeply; this console reads at most {MAX_JSON_DEPTH} levels")


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise refuse(
            where,
            f"contains a lone surrogate ({text[exc.start]!r} at position {exc.start}), which is not "
            "Unicode text; send the character itself or a valid surrogate pair",
        ) from None

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
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= MAX_WHOLE:
        shown = _short(repr(value)) if not isinstance(value, int) else _short(str(value))
        raise refuse(name, f"expected a whole number >= {lo} (at most {MAX_WHOLE}) or null, got {shown}")
    return value


def json_text(obj: Mapping[str, Any], name: str, *, default: str | None = None) -> str | None:
    value = obj.get(name, default)
    if value is None:
        return None
    if not isinstance(value, str):
        raise refuse(name, f"expected text, got {type(value).__name__}")
    return value
