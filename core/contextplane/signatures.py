"""One signature, two faces: the sync and async entry points of one body share its parameters.

A public pair such as ``deliver`` / ``adeliver`` differs only in how it waits on I/O; written
as two full signatures, the pair drifts (a keyword added to one, a default changed in the other)
and every caller's parameters are written twice. Here the parameters are written once, on a
*source* function, and each face declares only ``*args, **kwargs``: the decorators give the
face the source's signature, for ``inspect.signature`` and ``help()`` (``__signature__``) and
for type checkers (a ``ParamSpec``), generic parameters included.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = [
    "awaiting",
    "method_awaiting",
    "method_of",
    "method_same_as",
    "parameters_of",
    "same_as",
    "signature_of",
]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def signature_of(source: Callable[..., Any]) -> inspect.Signature:
    """``source``'s signature with its annotations evaluated when they can be (a face's
    ``__signature__`` is read as it is: tools that build schemas from it, as MCP servers do,
    need types, not strings), else as written."""
    try:
        return inspect.signature(source, eval_str=True)
    except NameError:  # a name imported only for type checkers
        return inspect.signature(source)


def _signed(face: Callable[..., Any], source: Callable[..., Any], returns: Any) -> None:
    face.__signature__ = signature_of(source).replace(return_annotation=returns)  # type: ignore[attr-defined]


def parameters_of(source: Callable[P, object]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """The face takes ``source``'s parameters and returns what it declares itself."""

    def face(function: Callable[..., R]) -> Callable[P, R]:
        _signed(function, source, signature_of(function).return_annotation)
        return function

    return face


def same_as(source: Callable[P, R]) -> Callable[[Callable[..., Any]], Callable[P, R]]:
    """The face takes ``source``'s parameters and returns what ``source`` returns."""

    def face(function: Callable[..., Any]) -> Callable[P, R]:
        _signed(function, source, signature_of(source).return_annotation)
        return function

    return face


def awaiting(
    source: Callable[P, R],
) -> Callable[[Callable[..., Coroutine[Any, Any, Any]]], Callable[P, Coroutine[Any, Any, R]]]:
    """The face is a coroutine function taking ``source``'s parameters, resolving to what
    ``source`` returns."""

    def face(function: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[P, Coroutine[Any, Any, R]]:
        _signed(function, source, signature_of(source).return_annotation)
        return function

    return face


def method_of(
    source: Callable[Concatenate[Any, P], object],
) -> Callable[[Callable[..., R]], Callable[Concatenate[S, P], R]]:
    """The face is a method of another class taking the method ``source``'s parameters (after
    ``self``) and returning what it declares itself."""

    def face(function: Callable[..., R]) -> Callable[Concatenate[S, P], R]:
        own = signature_of(function)
        theirs = list(signature_of(source).parameters.values())[1:]
        function.__signature__ = own.replace(  # type: ignore[attr-defined]
            parameters=[next(iter(own.parameters.values())), *theirs]
        )
        return function

    return face


def _method_signed(face: Callable[..., Any], source: Callable[..., Any]) -> None:
    own = signature_of(face)
    theirs = signature_of(source)
    face.__signature__ = own.replace(  # type: ignore[attr-defined]
        parameters=[next(iter(own.parameters.values())), *list(theirs.parameters.values())[1:]],
        return_annotation=theirs.return_annotation,
    )


def method_same_as(
    source: Callable[Concatenate[S, P], R],
) -> Callable[[Callable[..., Any]], Callable[Concatenate[S, P], R]]:
    """The face is a method taking the method ``source``'s parameters (after ``self``) and
    returning what ``source`` returns: a class's sync face of a body written once."""

    def face(function: Callable[..., Any]) -> Callable[Concatenate[S, P], R]:
        _method_signed(function, source)
        return function

    return face


def method_awaiting(
    source: Callable[Concatenate[S, P], R],
) -> Callable[[Callable[..., Coroutine[Any, Any, Any]]], Callable[Concatenate[S, P], Coroutine[Any, Any, R]]]:
    """The face is a coroutine method taking the method ``source``'s parameters (after
    ``self``), resolving to what ``source`` returns: the async face of the same body."""

    def face(
        function: Callable[..., Coroutine[Any, Any, Any]],
    ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
        _method_signed(function, source)
        return function

    return face
