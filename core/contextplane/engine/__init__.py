"""The one composition engine: what both the sync and the async composition run.

Why a package: composing a turn used to be written three times (``projection.compose``,
``aprojection``'s per-read drafting and its one-hop route), each with its own way of opening
the store's view. Now ``drafting`` holds the one drafting loop and the one view opener,
``assembly`` everything before and after drafting (the request checks, the budget, the
reports), ``driver`` the sync driver (the loop run to completion in the calling thread, with
no event loop) and ``async_driver`` the event loop's (the same loop in one worker hop, or with
each section awaited). ``contextplane.projection`` and ``contextplane.aprojection`` re-export
what callers import from them.
"""
