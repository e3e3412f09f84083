"""The contextplane console: a local HTTP server and JSON API over a deployment's backend.

Operators review agent-derived memories (ADR D7's confirmation step: confirm, reject,
supersede, expire, in bulk too), inspect what each model call saw (D5's prompt snapshots with
the trajectory and the injection log), and preview a projection with its budget table (D6).
It reads and writes only through the public API (``Backend``, ``KnowledgeStore``,
``compose_projected_context``), so it serves whatever backend the agent uses.

``contextplane console`` (extra ``console``) serves it; ``create_app`` builds the ASGI app.
The routes and the JSON API are documented in docs/console.md.
"""

from contextplane_console.app import create_app
from contextplane_console.server import ConsoleServer

__all__ = ["ConsoleServer", "create_app"]
