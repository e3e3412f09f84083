"""The D3 stable-prefix sections: identity, operating model, roster, tool guidance, guidelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextplane import BuildContext, ConfigError, build_stable_prefix
from contextplane.authority import section_texts
from contextplane_sections import operating_model

from .conftest import standard_host


def prefix(config, tools=(), **kw):
    return build_stable_prefix(standard_host(config), BuildContext(config=config, tools=tools, **kw))


def test_identity_reads_soul_md_relative_to_the_config(tmp_path: Path, tmp_config) -> None:
    (tmp_path / "SOUL.md").write_text("I am Ferris.\n")
    p = prefix(tmp_config(prompt={"soul_path": "SOUL.md"}))
    assert p.order[0] == "identity"
    assert section_texts(p)["identity"] == "I am Ferris."


def test_identity_missing_file_is_a_clear_error_naming_the_path(tmp_path: Path, tmp_config) -> None:
    with pytest.raises(ConfigError) as info:
        prefix(tmp_config(prompt={"soul_path": "nope/SOUL.md"}))
    assert str(info.value) == (
        f"prompt.soul_path names {tmp_path / 'nope' / 'SOUL.md'}, which does not exist: write the agent's "
        "SOUL.md there or fix the path"
    )


def test_identity_unset_warns_once_and_leaves_the_section_out(tmp_config) -> None:
    with pytest.warns(UserWarning, match="prompt.soul_path is not set"):
        p = prefix(tmp_config())
    assert "identity" not in p.order


def test_operating_model_default_and_override(tmp_config) -> None:
    assert section_texts(prefix(tmp_config()))["operating_model"] == operating_model.DEFAULT
    p = prefix(tmp_config(prompt={"operating_model": "Loop: think, act, record."}))
    assert section_texts(p)["operating_model"] == "Loop: think, act, record."


def test_delegation_roster_lists_only_subagents_visible_to_the_lead(tmp_config) -> None:
    config = tmp_config(
        subagents=[
            {"name": "researcher", "description": "Finds sources."},
            {"name": "auditor", "description": "Hidden.", "visible_to_lead": False},
            {"name": "captain"},
        ]
    )
    text = section_texts(prefix(config))["delegation_roster"]
    assert text == (
        "Subagents you can delegate to (use the task tool with the subagent's name):\n"
        "- captain\n- researcher: Finds sources."
    )
    assert "auditor" not in text


def test_tool_guidance_names_only_bound_tools(tmp_config) -> None:
    config = tmp_config(
        plugin={"tool_guidance": {"guidance": {"deploy": "Only in the window.", "drop_db": "Never."}}}
    )
    p = prefix(config, tools=("deploy", "search"), tool_descriptions={"search": "Search memory."})
    text = section_texts(p)["tool_guidance"]
    assert text == "Tools available in this session:\n- deploy: Only in the window.\n- search: Search memory."
    assert "drop_db" not in p.text
    assert "tool_guidance" not in prefix(config).order  # no tools bound, no section


def test_operator_guidelines_inline_and_file(tmp_path: Path, tmp_config) -> None:
    (tmp_path / "rules.md").write_text("- Never deploy on Fridays.\n")
    p = prefix(tmp_config(prompt={"guidelines": "- Link the ticket.", "guidelines_path": "rules.md"}))
    assert section_texts(p)["operator_guidelines"] == (
        "Operator guidelines:\n- Link the ticket.\n- Never deploy on Fridays."
    )
    with pytest.raises(ConfigError, match=r"guidelines_path names .*missing\.md, which cannot be read"):
        prefix(tmp_config(prompt={"guidelines_path": "missing.md"}))


def test_standard_sections_follow_the_authority_order(tmp_path: Path, tmp_config) -> None:
    (tmp_path / "SOUL.md").write_text("Persona.")
    config = tmp_config(prompt={"soul_path": "SOUL.md", "guidelines": "- Rule."}, subagents=[{"name": "r"}])
    p = prefix(config, tools=("t",))
    assert p.order == (
        "identity",
        "operating_model",
        "delegation_roster",
        "tool_guidance",
        "operator_guidelines",
    )
    assert [s.plugin for s in p.sections] == [
        "contextplane_sections.identity",
        "contextplane_sections.operating_model",
        "contextplane_sections.delegation",
        "contextplane_sections.tool_guidance",
        "contextplane_sections.guidelines",
    ]
