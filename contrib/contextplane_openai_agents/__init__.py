"""contextplane for the OpenAI Agents SDK (``openai-agents``, extra ``openai-agents``).

    from agents import Agent, Runner, SQLiteSession
    from contextplane.runtime import open_runtime
    from contextplane_openai_agents import run_config

    with open_runtime(config) as runtime:
        session = SQLiteSession("s1")
        agent = Agent(name="assistant", model=model)    # no instructions: the stable prefix is sent
        result = await Runner.run(agent, "when is the deploy window?", session=session,
                                  run_config=run_config(runtime, session=session))

The names load on first use, so importing this package needs no ``openai-agents`` until then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextplane_openai_agents.input_filter import ContextPlaneInputFilter, Flag
    from contextplane_openai_agents.items import ITEMS, ResponseItemsCodec
    from contextplane_openai_agents.runconfig import run_config

_WHERE = {
    "ContextPlaneInputFilter": "input_filter",
    "Flag": "input_filter",
    "ITEMS": "items",
    "ResponseItemsCodec": "items",
    "run_config": "runconfig",
}

__all__ = ["ITEMS", "ContextPlaneInputFilter", "Flag", "ResponseItemsCodec", "run_config"]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'contextplane_openai_agents' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"contextplane_openai_agents.{where}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in {"agents", "openai"}:
            raise ModuleNotFoundError(
                "contextplane_openai_agents needs the OpenAI Agents SDK: "
                "pip install 'contextplane[openai-agents]'",
                name=exc.name,
            ) from exc
        raise
    return getattr(module, name)
