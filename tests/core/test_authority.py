"""The stable prefix: authority order, before/after, and build-time errors that name names."""

from __future__ import annotations

import itertools
import warnings

import pytest

from contextplane import BuildContext, ConfigError, SectionOrderError, build_stable_prefix
from contextplane.authority import AUTHORITY_ORDER, resolve_order

from .helpers import SectionPlugin, host_of, text_section


def standard(*names: str) -> list:
    return [text_section(n, f"[{n}]", authority=10 * (AUTHORITY_ORDER.index(n) + 1)) for n in names]


def test_authority_order_ignores_registration_order() -> None:
    sections = standard(*AUTHORITY_ORDER)
    host = host_of(SectionPlugin(prompt=reversed(sections)))
    prefix = build_stable_prefix(host)
    assert prefix.order == AUTHORITY_ORDER
    assert prefix.text == "\n\n".join(f"[{n}]" for n in AUTHORITY_ORDER)
    assert [s.chars for s in prefix.sections] == [len(f"[{n}]") for n in AUTHORITY_ORDER]
    assert all(len(s.sha256) == 64 and s.plugin == "sections" for s in prefix.sections)


def test_before_after_places_plugin_section_between_standard_ones() -> None:
    host = host_of(
        SectionPlugin(prompt=standard(*AUTHORITY_ORDER), name="std"),
        SectionPlugin(
            prompt=[text_section("house_rules", "rules", after="identity", before="delegation_roster")],
            name="third",
        ),
    )
    order = build_stable_prefix(host).order
    assert order.index("identity") < order.index("house_rules") < order.index("delegation_roster")
    assert order[:2] == ("identity", "operating_model")  # ranked sections go first when ready


def test_unconstrained_plugin_sections_go_last_sorted_by_name() -> None:
    host = host_of(
        SectionPlugin(prompt=[text_section("zeta", "z"), text_section("alpha", "a")], name="third"),
        SectionPlugin(prompt=standard("identity", "tool_guidance"), name="std"),
    )
    assert build_stable_prefix(host).order == ("identity", "tool_guidance", "alpha", "zeta")


def test_order_is_independent_of_plugin_registration_order() -> None:
    a = SectionPlugin(prompt=[text_section("a_sec", "a", after="identity")], name="a")
    b = SectionPlugin(prompt=[text_section("b_sec", "b", before="tool_guidance")], name="b")
    std = SectionPlugin(prompt=standard(*AUTHORITY_ORDER), name="std")
    first = build_stable_prefix(host_of(a, b, std)).text
    second = build_stable_prefix(host_of(std, b, a)).text
    assert first == second


def test_cycle_error_shows_the_full_path_and_plugins() -> None:
    host = host_of(
        SectionPlugin(prompt=standard("identity", "tool_guidance"), name="std"),
        SectionPlugin(prompt=[text_section("x", "x", after="tool_guidance", before="y")], name="plug_x"),
        SectionPlugin(prompt=[text_section("y", "y", before="identity")], name="plug_y"),
    )
    with pytest.raises(SectionOrderError) as info:
        build_stable_prefix(host)
    msg = str(info.value)
    assert "prompt sections form a cycle:" in msg
    path = msg.split("cycle: ")[1].split(" (")[0].split(" -> ")
    assert path[0] == path[-1]
    assert set(path) == {"identity", "tool_guidance", "x", "y"}
    # each consecutive pair is a real constraint, in run order
    for a, b in itertools.pairwise(path):
        assert (
            f"{a} before {b}" in msg
            or f"{b}.after={a}" in msg
            or f"{a}.before={b}" in msg
            or ("authority order" in msg and (a, b) == ("identity", "tool_guidance"))
        )
    assert "plug_x" in msg and "plug_y" in msg and "std" in msg


def test_unknown_name_in_constraint_names_plugin_section_and_known_names() -> None:
    # Strict mode: the first bad constraint stops the build, naming everything.
    host = host_of(
        SectionPlugin(prompt=standard("identity"), name="std"),
        SectionPlugin(prompt=[text_section("notes", "n", after="identiy")], name="notes_plugin"),
    )
    with pytest.raises(SectionOrderError) as info:
        build_stable_prefix(host, strict=True)
    msg = str(info.value)
    assert "plugin 'notes_plugin'" in msg
    assert "prompt section 'notes' declares after='identiy'" in msg
    assert "(did you mean 'identity'?)" in msg
    assert "known sections: identity, notes" in msg


def test_an_unknown_name_outside_strict_mode_costs_only_that_plugins_sections() -> None:
    host = host_of(
        SectionPlugin(prompt=standard("identity", "operating_model"), name="std"),
        SectionPlugin(
            prompt=[text_section("notes", "n", after="identiy"), text_section("more", "m")], name="notes_plugin"
        ),
        SectionPlugin(prompt=[text_section("tail", "t", after="operating_model")], name="tail_plugin"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prefix = build_stable_prefix(host)
    assert prefix.order == ("identity", "operating_model", "tail")  # the rest of the prefix stays
    expected = (
        "plugin 'notes_plugin' failed during prompt order: plugin 'notes_plugin': prompt section 'notes' "
        "declares after='identiy', but no section of that name is registered (did you mean 'identity'?) "
        "(known sections: identity, more, notes, operating_model, tail); its prompt sections are left out "
        "of the stable prefix; the plugin author must fix the constraint, or enable the plugin that "
        "provides the section"
    )
    assert prefix.errors == (expected,)
    infos = {i.name: i for i in host.plugin_infos()}
    assert infos["notes_plugin"].errors == (expected.split(" failed during ")[1],)
    assert infos["tail_plugin"].errors == ()
    # A section whose only target was a dropped plugin's section goes too (pruned to a fixed point).
    host = host_of(
        SectionPlugin(prompt=standard("identity"), name="std"),
        SectionPlugin(prompt=[text_section("a", "a", after="nope")], name="pa"),
        SectionPlugin(prompt=[text_section("b", "b", after="a")], name="pb"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prefix = build_stable_prefix(host)
    assert prefix.order == ("identity",) and [e.split("'")[1] for e in prefix.errors] == ["pa", "pb"]


def test_duplicate_section_name_names_both_plugins() -> None:
    host = host_of(
        SectionPlugin(prompt=[text_section("identity", "one")], name="first_plugin"),
        SectionPlugin(prompt=[text_section("identity", "two")], name="second_plugin"),
    )
    with pytest.raises(
        SectionOrderError,
        match=r"duplicate prompt section 'identity': registered by plugin 'first_plugin' and by plugin 'second_plugin'",
    ):
        build_stable_prefix(host)


def test_self_reference_is_an_error() -> None:
    host = host_of(SectionPlugin(prompt=[text_section("me", "m", after="me")]))
    with pytest.raises(SectionOrderError, match="names itself"):
        build_stable_prefix(host, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prefix = build_stable_prefix(host)
    assert prefix.order == () and "declares after='me', which names itself" in prefix.errors[0]


def _boom(_ctx: BuildContext) -> str:
    raise RuntimeError("template missing")


def test_failing_render_is_isolated_and_recorded() -> None:
    from contextplane import PromptSection

    host = host_of(
        SectionPlugin(prompt=standard("identity"), name="std"),
        SectionPlugin(prompt=[PromptSection("fragile", _boom)], name="fragile_plugin"),
    )
    prefix = build_stable_prefix(host)
    assert prefix.order == ("identity",)
    assert prefix.errors == (
        "prompt section 'fragile' of plugin 'fragile_plugin' failed: RuntimeError: template missing",
    )
    with pytest.raises(SectionOrderError, match=r"template missing.*strict mode"):
        build_stable_prefix(host, strict=True)


def test_config_errors_in_render_always_raise() -> None:
    from contextplane import PromptSection

    def needs_file(_ctx: BuildContext) -> str:
        raise ConfigError("SOUL.md not found at /nowhere/SOUL.md")

    host = host_of(SectionPlugin(prompt=[PromptSection("identity", needs_file, authority=10)]))
    with pytest.raises(ConfigError, match=r"/nowhere/SOUL\.md"):
        build_stable_prefix(host)


def test_render_returning_non_text_is_recorded() -> None:
    from contextplane import PromptSection

    host = host_of(SectionPlugin(prompt=[PromptSection("odd", lambda _c: 42)], name="odd_plugin"))  # type: ignore[arg-type,return-value]
    assert build_stable_prefix(host).errors == (
        "prompt section 'odd' of plugin 'odd_plugin' failed: TypeError: render returned int; expected str",
    )


def test_resolve_order_is_pure() -> None:
    host = host_of(SectionPlugin(prompt=standard(*AUTHORITY_ORDER)))
    regs = host.prompt_sections()
    assert [r.section.name for r in resolve_order(regs)] == list(AUTHORITY_ORDER)
    assert [r.section.name for r in resolve_order(list(reversed(regs)))] == list(AUTHORITY_ORDER)


def test_observer_receives_stable_prefix() -> None:
    from contextplane import hookimpl

    seen = []

    class Observer:
        plugin_name = "observer"

        @hookimpl
        def observe_stable_prefix(self, prefix):  # type: ignore[no-untyped-def]
            seen.append(prefix)

    host = host_of(SectionPlugin(prompt=standard("identity")), Observer())
    prefix = build_stable_prefix(host)
    assert seen == [prefix]
