"""contextplane for PydanticAI agents: a capability (extra ``pydantic-ai``).

from contextplane.runtime import open_runtime
from contextplane_pydantic_ai import ContextPlaneCapability

runtime = open_runtime(config)
agent = Agent(model, capabilities=[ContextPlaneCapability(runtime)])

The stable prefix is the agent's instructions; the projection is composed once per run and
placed in each model request of the run, never in its messages (see ``capability``).
Importing ``contextplane`` never imports this package or PydanticAI.
"""

from contextplane_pydantic_ai.capability import ContextPlaneCapability
from contextplane_pydantic_ai.codec import CODEC, PROJECTION_MARKER, PydanticAICodec, is_projection

__all__ = ["CODEC", "PROJECTION_MARKER", "ContextPlaneCapability", "PydanticAICodec", "is_projection"]
