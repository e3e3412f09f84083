"""The pluggy markers, in a module that imports nothing else of contextplane.

Why apart from ``hookspecs``: the specs are typed with the request, the store and backend
protocols and the configuration, so importing them loads the store (apsw, sqlite-vec) and
cattrs; a section plugin needs only ``hookimpl`` to declare its hooks, and importing the plugin
(an entry point loaded by every host) should not pay for the store. ``hookspecs`` re-exports
both markers, so ``contextplane.hookspecs.hookimpl`` is this same object.
"""

from __future__ import annotations

import pluggy

#: The pluggy project name and the entry-point group plugins are found under.
PROJECT = "contextplane"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
