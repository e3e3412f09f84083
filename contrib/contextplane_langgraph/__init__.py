"""contextplane for LangChain v1 agents on LangGraph: the native runtime (ADR D2).

from langchain.agents import create_agent
from contextplane_langgraph import ContextPlaneMiddleware

agent = create_agent(model, tools, middleware=[ContextPlaneMiddleware(stable_prefix=True)],
                     checkpointer=saver)
"""

from contextplane_langgraph.frames import (
    FRAME_MARKERS,
    is_context_frame,
    is_operator_input,
    newest_operator_input,
    strip_context_frames,
    turn_position,
)
from contextplane_langgraph.middleware import (
    PROJECTION_KEY,
    ContextPlaneMiddleware,
    ContextPlaneState,
    ProjectionCarrier,
    without_projection,
)

__all__ = [
    "FRAME_MARKERS",
    "PROJECTION_KEY",
    "ContextPlaneMiddleware",
    "ContextPlaneState",
    "ProjectionCarrier",
    "is_context_frame",
    "is_operator_input",
    "newest_operator_input",
    "strip_context_frames",
    "turn_position",
    "without_projection",
]
