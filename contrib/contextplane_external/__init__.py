"""contextplane for runtimes that are not LangGraph (ADR D8): one projection, memory tools."""

from contextplane_external.assembler import Assembly, ContextAssembler, Source
from contextplane_external.tools import (
    ToolLimits,
    amemory_ingest,
    amemory_recall,
    bind_async_memory_get,
    bind_async_memory_tools,
    bind_memory_tools,
    hit_to_dict,
    memory_ingest,
    memory_recall,
)

__all__ = [
    "Assembly",
    "ContextAssembler",
    "Source",
    "ToolLimits",
    "amemory_ingest",
    "amemory_recall",
    "bind_async_memory_get",
    "bind_async_memory_tools",
    "bind_memory_tools",
    "hit_to_dict",
    "memory_ingest",
    "memory_recall",
]
