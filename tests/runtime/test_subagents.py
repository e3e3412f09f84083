"""The subagent contract: its own prompt verbatim, no projection unless it opts in."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from contextplane import ConfigError, ProjectionRequest, Surface
from contextplane.config import structure
from contextplane.subagents import (
    SubagentContract,
    build_subagent_prompt,
    check_contracts,
    compose_subagent_context,
    subagent_contract,
)
from contextplane_langgraph import is_context_frame

from .conftest import MARK, MEMTEXT, cfg, make_agent

CONFIG = {
    "context": {"context_window": 200_000},
    "subagents": [
        {"name": "researcher", "prompt": "You research. Cite sources.\n"},
        {"name": "planner", "prompt": "You plan.", "sections": ["working"], "budget_tokens": 500},
    ],
}


def turn(host, query: str, **kw) -> ProjectionRequest:
    """The lead turn's request, which a subagent's composition evolves."""
    return ProjectionRequest(query=query, config=host.config, **kw)


def test_default_contract_is_the_prompt_verbatim_and_no_projection(host, sections) -> None:
    config = structure(CONFIG)
    researcher = subagent_contract(config, "researcher")
    assert researcher == SubagentContract("researcher", "You research. Cite sources.\n", (), None)
    assert build_subagent_prompt(researcher) == "You research. Cite sources.\n"
    assert compose_subagent_context(researcher, turn(host, "q"), host=host) is None
    assert sections.draws == []  # no section was asked for anything


def test_opted_in_sections_only_under_the_subagents_own_budget(host, sections, injection_log) -> None:
    planner = subagent_contract(structure(CONFIG), "planner")
    p = compose_subagent_context(planner, turn(host, "plan:q", session_id="sub", turn_index=2), host=host)
    assert p is not None
    assert [d.section for d in sections.draws] == ["working"]
    assert p.budget_chars == 500 * 4
    assert p.surface is Surface.SUBAGENT and p.mode == "subagent"
    assert p.delivered_ids == {"working": ("ws-1", "ws-2")}
    assert {s.name: s.suppressed for s in p.sections} == {
        "working": None,
        "memory": "not_selected",
        "digest": "not_selected",
    }
    assert MEMTEXT not in p.text and "MARK{sub|2|plan:q}" in p.text
    assert injection_log.rows == [("sub", 2, {"working": ("ws-1", "ws-2")})]


def test_incognito_still_applies_to_a_subagent_that_opted_into_memory(host, sections) -> None:
    contract = SubagentContract("m", "p", ("working", "memory"), 1000)
    p = compose_subagent_context(contract, turn(host, "q", incognito=True), host=host)
    assert p is not None and MEMTEXT not in p.text
    assert [d.section for d in sections.draws] == ["working"]


def test_unknown_section_in_a_contract_is_a_clear_error(host) -> None:
    bad = structure({"subagents": [{"name": "scout", "sections": ["workin", "nonsense"]}]})
    with pytest.raises(ConfigError) as err:
        check_contracts(bad, host)
    assert str(err.value) == (
        "subagent 'scout' opts into context sections that no plugin registers: "
        "'workin' (did you mean 'working'?), 'nonsense'; registered sections: digest, memory, working. "
        "Fix subagents.sections for 'scout' (in configuration), or enable the plugin that provides them"
    )
    with pytest.raises(ConfigError, match="opts into context sections"):
        compose_subagent_context(SubagentContract("scout", "", ("workin",)), turn(host, "q"), host=host)


def test_unknown_subagent_name_is_a_clear_error() -> None:
    with pytest.raises(
        ConfigError, match=r"no subagent named 'coder' is configured \(configured: planner, researcher\)"
    ):
        subagent_contract(structure(CONFIG), "coder")


def run(agent, mode: str, text: str, thread: str) -> None:
    """One turn through the sync hooks (``invoke``) or the async ones (``ainvoke``)."""
    payload = {"messages": [HumanMessage(text)]}
    if mode == "invoke":
        agent.invoke(payload, cfg(thread))
    else:
        asyncio.run(agent.ainvoke(payload, cfg(thread)))


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_subagent_graph_sees_its_prompt_and_only_its_sections(host, sections, backend, mode: str) -> None:
    config = structure(CONFIG)
    # Default contract on a real agent: system message verbatim, no projection message.
    agent, model, _saver, _mw = make_agent(
        host,
        policy=lambda _m: AIMessage("ok"),
        tools=[],
        backend=backend,
        subagent=subagent_contract(config, "researcher"),
    )
    run(agent, mode, "sub:find it", "sub-r")
    [seen] = model.calls
    assert [(m.type, m.content) for m in seen] == [
        ("system", "You research. Cite sources.\n"),
        ("human", "sub:find it"),
    ]
    assert sections.draws == []
    # Nothing was composed, so nothing is recorded: no injection row, no snapshot.
    assert backend.injections.rows() == [] and backend.snapshots.list() == []

    agent, model, _saver, _mw = make_agent(
        host,
        policy=lambda _m: AIMessage("ok"),
        tools=[],
        backend=backend,
        subagent=subagent_contract(config, "planner"),
    )
    run(agent, mode, "sub:plan it", "sub-p")
    [seen] = model.calls
    assert seen[0].content == "You plan."
    assert is_context_frame(seen[-1]) and MARK in seen[-1].content and MEMTEXT not in seen[-1].content
    assert [d.section for d in sections.draws] == ["working"]
    # The opted-in projection is recorded like any turn's, under the subagent's label.
    [row] = backend.injections.rows("sub-p")
    assert (row.mode, row.delivered, row.budget_chars) == ("subagent", {"working": ["ws-1", "ws-2"]}, 2000)
    [snap] = backend.snapshots.list("sub-p")
    assert snap.mode == "subagent" and snap.delivered_ids == {"working": ("ws-1", "ws-2")}
    assert [p.name for p in snap.prefix_sections] == ["system_prompt"]
