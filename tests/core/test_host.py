"""A host that honours or refuses: pluggy options it would ignore are refused with a message
that names the plugin, the hook and the function; hook calls can be traced; a config never
replaces the process-wide host; isolated failures are logged once, with their traceback."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from contextplane import ContextSection, Envelope, Row, Shed, compose_projected_context, hookimpl
from contextplane.config import load_config
from contextplane.notices import reset_notices
from contextplane.plugins import TRACE_ENV, PluginHost, get_host, reset_host

from .helpers import host_of


def _options_plugin(option: str) -> object:
    class Wants:
        plugin_name = f"wants_{option}"

        @hookimpl(**{option: True})
        def observe_projection(self, projection):
            if option in ("wrapper", "hookwrapper"):
                yield
            return None

    return Wants()


@pytest.mark.parametrize("option", ["wrapper", "hookwrapper", "tryfirst", "trylast"])
def test_hookimpl_options_the_facade_does_not_honour_are_refused(option: str) -> None:
    host = host_of(_options_plugin(option))
    assert not host.pm.has_plugin(f"wants_{option}")
    (failure,) = host.failures
    why = (
        "hooks are called one implementation at a time, so there is no call to wrap"
        if "wrapper" in option
        else "the order is contextplane's own (plugin name, then section priority or before/after)"
    )
    assert failure.describe() == (
        f"plugin 'wants_{option}' failed during validation: hook implementation "
        f"'_options_plugin.<locals>.Wants.observe_projection' for hook 'observe_projection' in module "
        f"'tests.core.test_host' asks for {option}=True, which contextplane does not honour: {why}. "
        f"Remove {option}=True from its @hookimpl"
    )


def test_historic_is_refused_too() -> None:
    class Historic:
        plugin_name = "historic"

        @hookimpl(specname="observe_stable_prefix")
        def seen(self, prefix):
            pass

    Historic.seen.contextplane_impl["historic"] = True  # type: ignore[attr-defined]
    host = host_of(Historic())
    assert "asks for historic=True" in host.failures[0].error


def test_refusal_is_an_error_in_strict_mode() -> None:
    from contextplane import PluginLoadError

    with pytest.raises(PluginLoadError, match=r"asks for tryfirst=True.*\(strict mode"):
        host_of(_options_plugin("tryfirst"), strict=True)


class Sections:
    plugin_name = "traced"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        register(ContextSection("t", 10, Shed.NEVER, lambda req: [Row("r", 1, "x")], Envelope("t")))


def test_trace_logs_every_hook_call_with_plugin_arguments_and_result(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(TRACE_ENV, "1")

    class Fails:
        plugin_name = "0_fails"

        @hookimpl
        def embedder(self, config):
            raise RuntimeError("no model")

    with caplog.at_level(logging.INFO, logger="contextplane.plugins.trace"):
        host = host_of(Fails(), Sections())
        host.embedder()
        compose_projected_context("q", host=host, budget_tokens=0)
    lines = [r.getMessage() for r in caplog.records if r.name == "contextplane.plugins.trace"]
    assert any(
        line.startswith("hook embedder plugin=0_fails (config=Config(")
        and "raised RuntimeError: no model in" in line
        for line in lines
    ), lines
    assert any(
        line.startswith("hook register_context_sections plugin=traced (register=<function")
        and "-> None in" in line
        for line in lines
    ), lines
    assert any(line.startswith("hook observe_projection plugin=contextplane.records (") for line in lines)


def test_no_trace_without_the_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(TRACE_ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="contextplane.plugins.trace"):
        compose_projected_context("q", host=host_of(Sections()), budget_tokens=0)
    assert [r for r in caplog.records if r.name == "contextplane.plugins.trace"] == []


def test_get_host_is_stable_across_calls_with_a_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTPLANE_PLUGINS", "")
    reset_host()
    try:
        first = get_host()
        loads = []
        real = PluginHost.load_entry_points
        monkeypatch.setattr(
            PluginHost, "load_entry_points", lambda self, **kw: loads.append(1) or real(self, **kw)
        )
        for _ in range(3):
            assert get_host(load_config()) is first
            compose_projected_context("q", config=load_config(), budget_tokens=0)
            assert get_host() is first
        assert loads == []  # no call reloaded the entry points
    finally:
        reset_host()


def test_a_failing_provider_is_logged_once_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    reset_notices()

    class Broken:
        plugin_name = "broken_provider"

        @hookimpl
        def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
            def draft(request):
                raise KeyError("calendar_token")

            register(ContextSection("calendar", 30, Shed.DROP_ROWS, draft, Envelope("calendar")))

    host = host_of(Broken(), Sections())
    with caplog.at_level(logging.WARNING, logger="contextplane"):
        for _ in range(3):
            p = compose_projected_context("q", host=host, budget_tokens=0)
            assert p.section("calendar").error == "KeyError: 'calendar_token'"
            assert p.section("t").item_ids == ("r",)  # the turn went on
    failures = [r for r in caplog.records if "calendar" in r.getMessage()]
    assert len(failures) == 1
    record = failures[0]
    assert record.levelno == logging.WARNING and record.name == "contextplane.projection"
    assert record.getMessage() == (
        "context section 'calendar' of plugin 'broken_provider' failed, so it is left out of this "
        "projection: KeyError: 'calendar_token'"
    )
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "raise KeyError" in caplog.text  # the traceback names the failing line


def test_a_failing_observer_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    reset_notices()

    class BadObserver:
        plugin_name = "bad_observer"

        @hookimpl
        def observe_projection(self, projection):
            raise OSError("disk full")

    host = host_of(BadObserver(), Sections())
    with caplog.at_level(logging.WARNING, logger="contextplane"):
        compose_projected_context("q", host=host, budget_tokens=0)
        compose_projected_context("q", host=host, budget_tokens=0)
    logged = [r for r in caplog.records if "bad_observer" in r.getMessage()]
    assert [r.getMessage() for r in logged] == [
        "plugin 'bad_observer' failed during observe_projection: OSError: disk full"
    ]
    assert logged[0].exc_info is not None


def test_a_settings_table_one_typo_from_an_installed_plugin_is_refused_by_name() -> None:
    from contextplane.config import structure
    from contextplane.errors import ConfigError
    from contextplane.notices import PluginWarning

    with pytest.raises(ConfigError, match=r"\[plugin\.skils\] names no installed plugin.*did you mean \[plugin\.skills\]"):
        PluginHost.from_entry_points(structure({"plugin": {"skils": {"floor": 1}}}))
    reset_notices()
    with pytest.warns(PluginWarning, match=r"\[plugin\.elsewhere_only\] names no installed plugin"):
        host = PluginHost.from_entry_points(structure({"plugin": {"elsewhere_only": {"x": 1}}}))
    assert host.config.plugin_settings("elsewhere_only") == {"x": 1}
    PluginHost.from_entry_points(structure({"plugin": {"skills": {"floor": 1}}}))  # the right name is fine
