"""Configuration: search path, environment overrides, and errors that name the key and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextplane import ConfigError, load_config
from contextplane.config import env_overrides, find_config_file, structure


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"context": {"budget_pct": "eight"}},
            'invalid value for context.budget_pct: expected a number from 0 to 100, got "eight"',
        ),
        (
            {"context": {"budget_pct": 101}},
            "invalid value for context.budget_pct: expected a number from 0 to 100, got 101",
        ),
        (
            {"context": {"budget_pct": True}},
            "invalid value for context.budget_pct: expected a number from 0 to 100, got true",
        ),
        (
            {"context": {"context_window": 0}},
            "invalid value for context.context_window: expected a whole number of tokens > 0, got 0",
        ),
        (
            {"context": {"prior_sessions": "sometimes"}},
            'invalid value for context.prior_sessions: expected one of "newest", "relevant", "off", got "sometimes"',
        ),
        (
            {"context": {"inject_min_trust": 4}},
            "invalid value for context.inject_min_trust: expected 1, 2 or 3, got 4",
        ),
        (
            {"context": {"min_relevance": 1.5}},
            "invalid value for context.min_relevance: expected a number from 0 to 1, got 1.5",
        ),
        (
            {"context": {"min_relevance": "high"}},
            'invalid value for context.min_relevance: expected a number from 0 to 1, got "high"',
        ),
        (
            {"context": {"budget_pct": 8, "bogus": 1}},
            "unknown key context.bogus: remove it or check its spelling",
        ),
        ({"contxt": {}}, "unknown key contxt: remove it or check its spelling (did you mean context?)"),
        (
            {"plugins": {"enabled": "a,b"}},
            'invalid value for plugins.enabled: expected a list of plugin names, got "a,b"',
        ),
        (
            {"plugins": {"strict": "yes"}},
            'invalid value for plugins.strict: expected true or false, got "yes"',
        ),
        (
            {"subagents": [{"name": "r", "visible_to_lead": 1}]},
            "invalid value for subagents.0.visible_to_lead: expected true or false, got 1",
        ),
        ({"subagents": [{"description": "no name"}]}, "missing required key subagents.0.name"),
        ({"base_dir": "/etc"}, "unknown key base_dir: remove it or check its spelling"),
    ],
)
def test_errors_name_the_path_and_the_bad_value(data, message) -> None:
    with pytest.raises(ConfigError) as info:
        structure(data, origin="contextplane.toml")
    assert str(info.value) == f"{message} (in contextplane.toml)"


def test_defaults() -> None:
    cfg = structure({})
    assert cfg.context.budget_pct == 8 and cfg.context.budget_floor_chars == 16_000
    assert cfg.context.prior_sessions == "newest" and cfg.plugins.enabled is None and not cfg.plugins.strict


def test_search_path_and_environment_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert find_config_file(environ=env) is None
    xdg = tmp_path / "xdg" / "contextplane" / "contextplane.toml"
    xdg.parent.mkdir(parents=True)
    xdg.write_text("[context]\nbudget_pct = 5\n")
    assert find_config_file(environ=env) == xdg
    local = tmp_path / "contextplane.toml"
    local.write_text("[context]\nbudget_pct = 6\n[prompt]\nsoul_path = 'SOUL.md'\n")
    assert find_config_file(environ=env) == local
    explicit = tmp_path / "other.toml"
    explicit.write_text("[context]\nbudget_pct = 7\n")
    assert find_config_file(environ={**env, "CONTEXTPLANE_CONFIG": str(explicit)}) == explicit
    cfg = load_config(
        environ={**env, "CONTEXTPLANE_CONTEXT__BUDGET_PCT": "3", "CONTEXTPLANE_CONTEXT__PROJECT": "web"}
    )
    assert cfg.context.budget_pct == 3 and cfg.context.project == "web"
    assert cfg.source == f"{local} + environment"
    assert cfg.resolve_path("SOUL.md") == tmp_path / "SOUL.md"


def test_environment_errors_say_where_they_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(environ={"XDG_CONFIG_HOME": str(tmp_path), "CONTEXTPLANE_CONTEXT__BUDGET_PCT": "eight"})
    assert (
        str(info.value)
        == 'invalid value for context.budget_pct: expected a number from 0 to 100, got "eight" (in environment)'
    )


def test_missing_or_broken_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file .*nope\.toml does not exist"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"CONTEXTPLANE_CONFIG names .*gone\.toml, which does not exist"):
        find_config_file(environ={"CONTEXTPLANE_CONFIG": str(tmp_path / "gone.toml")})
    bad = tmp_path / "bad.toml"
    bad.write_text("[context\nbudget_pct = 8\n")
    with pytest.raises(ConfigError, match=r"bad\.toml is not valid TOML"):
        load_config(bad)


def test_env_override_parsing() -> None:
    env = {
        "CONTEXTPLANE_CONTEXT__BUDGET_PCT": "4.5",
        "CONTEXTPLANE_PLUGINS__ENABLED": '["a", "b"]',
        "CONTEXTPLANE_PLUGINS": "a,b",
        "OTHER": "x",
        "CONTEXTPLANE_STORE__PATH": "/tmp/x.sqlite3",
    }
    assert env_overrides(env) == {
        "context": {"budget_pct": 4.5},
        "plugins": {"enabled": ["a", "b"]},
        "store": {"path": "/tmp/x.sqlite3"},
    }


def test_store_vector_probes_reaches_the_store(tmp_path: Path) -> None:
    from contextplane import plugin_host_with
    from contextplane.defaults import open_knowledge_store

    cfg = structure({"store": {"path": str(tmp_path / "m.sqlite3"), "vector_probes": 24}})
    store = open_knowledge_store(plugin_host_with([], cfg))
    assert store._vector_probes == 24
    with pytest.raises(
        ConfigError,
        match=r"invalid value for store\.vector_probes: expected a whole number of lists > 0, got 0",
    ):
        structure({"store": {"vector_probes": 0}})
