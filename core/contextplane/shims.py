"""Old import paths kept when a module is split by job: a name patched on the old path still
reaches the code that reads it.

Why more than re-exports: tests and third parties patch names on the module they knew
(``monkeypatch.setattr(fitting, "escape_measured", ...)``). While that was one module, the patch
reached every function that read the name; once the functions live in the new modules, a
re-export is a second binding and the patch would change nothing. ``patch_through`` gives the
old module a class whose ``setattr`` also sets the name in each new module (its *home*) that
holds the same object under it, so a patch keeps reaching the code, and undoing it restores it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from typing import Any, Final

_ABSENT: Final = object()


def patch_through(module_name: str, homes: Iterable[types.ModuleType]) -> None:
    """Make ``setattr`` on the module ``module_name`` also set the name in each of ``homes``
    that holds the object the name held (call it last, once the module has bound every name)."""
    module = sys.modules[module_name]
    module.__class__ = _shim_class(tuple(homes))


def _shim_class(homes: tuple[types.ModuleType, ...]) -> type[types.ModuleType]:
    class PatchThrough(types.ModuleType):
        """A module whose ``setattr`` reaches the homes of the name (see ``contextplane.shims``)."""

        def __setattr__(self, name: str, value: Any) -> None:
            old = self.__dict__.get(name, _ABSENT)
            super().__setattr__(name, value)
            if old is _ABSENT:
                return
            for home in homes:
                if home.__dict__.get(name, _ABSENT) is old:
                    setattr(home, name, value)

    return PatchThrough
