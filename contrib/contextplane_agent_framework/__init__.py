"""contextplane for Microsoft Agent Framework (``agent-framework-core``): a context provider.

    from agent_framework import Agent
    from contextplane.runtime import open_runtime
    from contextplane_agent_framework import ContextPlaneProvider

    runtime = open_runtime(config, backend=backend)
    agent = Agent(client, context_providers=[ContextPlaneProvider(runtime)])

Install with ``pip install 'contextplane[agent-framework]'``.
"""

try:
    import agent_framework  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "contextplane_agent_framework needs agent-framework-core: "
        "pip install 'contextplane[agent-framework]'"
    ) from exc

from contextplane_agent_framework.messages import PROJECTION_MARKER, is_context_frame
from contextplane_agent_framework.provider import ContextPlaneProvider, ProjectionDelivery

__all__ = ["PROJECTION_MARKER", "ContextPlaneProvider", "ProjectionDelivery", "is_context_frame"]
