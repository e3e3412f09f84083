"""Hostile numbers on the command line: every whole-number flag and every id argument answers a
value no store can hold with one ``error:`` line naming it, never a traceback (issue 26, item 5).

Why walk the command tree: the flags are found, not listed, so a numeric flag added later is
attacked here too, and a plain ``type=int`` (which lets 2^64 through to the driver) fails the
test that every whole-number parameter is a ``Whole``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextplane.cli import _plugged_commands, main
from contextplane.cli_params import STORE_INT_MAX, Whole

#: Commands whose numeric flags must be attacked without ever running them for real.
SERVING = {"console", "mcp", "demo"}


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    names = set(group.list_commands(click.Context(group))) | (set(_plugged_commands()) if not path else set())
    for name in sorted(names):
        command = group.get_command(click.Context(group), name)
        if command is None:
            continue
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def is_numeric(param: click.Parameter) -> bool:
    kind = param.type
    if isinstance(kind, Whole | click.types.IntParamType | click.types.FloatParamType):
        return True
    name = param.name or ""
    return isinstance(param, click.Argument) and name.endswith("id") and name != "session_id"


TARGETS = [
    (path, command, param)
    for path, command in commands(main)
    for param in command.params
    if is_numeric(param)
]


def test_the_walk_finds_the_numeric_flags_the_issue_names() -> None:
    found = {(" ".join(path), p.name) for path, _c, p in TARGETS}
    for expected in [
        ("memory show", "chunk_id"),
        ("memory confirm", "chunk_id"),
        ("explain", "turn_index"),
        ("explain", "memory_id"),
        ("replay", "turn_index"),
        ("snapshots show", "turn"),
        ("snapshots show", "call"),
        ("memory search", "k"),
        ("preview", "budget_tokens"),
    ]:
        assert expected in found, sorted(found)


def test_every_whole_number_parameter_is_bounded_by_what_a_store_holds() -> None:
    """A plain int (``type=int``, ``IntRange``) lets 2^64 reach SQLite or PostgreSQL."""
    loose = [
        (" ".join(path), p.name)
        for path, _c, p in TARGETS
        if isinstance(p.type, click.types.IntParamType | click.types.FloatParamType)
        and not (isinstance(p.type, click.IntRange) and p.type.max is not None and p.type.max <= STORE_INT_MAX)
    ]
    assert loose == []


def invocation(command: click.Command, target: click.Parameter, value: str, db: Path) -> list[str]:
    """Arguments that fill every required parameter with something plausible and ``target``
    with ``value``."""
    args: list[str] = []
    for param in command.params:
        if isinstance(param, click.Argument):
            if param is target:
                args.append(value)
            elif param.required:
                args.append("1" if is_numeric(param) else "s")
        elif param is target:
            args += [param.opts[0], value]
        elif param.required:
            args += [param.opts[0], "s"]
    if any(p.name == "db" for p in command.params):
        args += ["--db", str(db)]
    return args


#: Whole numbers no store holds, the largest ones it does (a k or a limit that large must not
#: overflow what is derived from it), and text that only looks like a number.
HOSTILE = st.one_of(
    st.integers(min_value=2**63, max_value=10**40).map(str),
    st.integers(min_value=-(10**40), max_value=-(2**63) - 1).map(str),
    st.sampled_from([str(2**63 - 1), str(2**62), str(2**32), str(2**31)]),
    st.sampled_from(["1e30", "0x10", "١٢", "--1", "9" * 5000, "1.5", "NaN", ""]),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("cli-numbers") / "memory.sqlite3"
    res = CliRunner().invoke(main, ["memory", "add", "the deploy window is Friday", "--db", str(db)])
    assert res.exit_code == 0, res.output
    return db


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(TARGETS), value=HOSTILE)
def test_every_numeric_flag_refuses_hostile_numbers_in_one_line(
    store: Path, target: tuple[tuple[str, ...], click.Command, click.Parameter], value: str
) -> None:
    path, command, param = target
    args = [*path, *invocation(command, param, value, store)]
    if path[0] in SERVING and _in_range(param, value):
        return  # a value the flag accepts would start a server
    res = CliRunner().invoke(main, args, catch_exceptions=True)
    assert "Traceback" not in res.output, (args, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, repr(res.exception))
    assert res.exit_code in (0, 2), (args, res.exit_code, res.output)
    errors = [line for line in res.output.splitlines() if line.startswith("error:")]
    if res.exit_code == 2:
        assert len(errors) == 1, (args, res.output)


def _in_range(param: click.Parameter, value: str) -> bool:
    try:
        param.type.convert(value, param, None)
    except click.BadParameter:
        return False
    return True


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["memory", "show", "99999999999999999999999"], "no memory with id '99999999999999999999999'"),
        (["memory", "confirm", "99999999999999999999999"], "no memory with id '99999999999999999999999'"),
        (["memory", "reject", "--", str(-(2**63) - 1)], f"no memory with id '{-(2**63) - 1}'"),
        (["explain", "1", "--session", "s", "--turn", str(2**64)], f"'{2**64}' is past the largest"),
        (["replay", "--session", "s", "--turn", "99999999999999999999999"], "'99999999999999999999999' is past"),
        (["snapshots", "show", "s", str(2**63)], f"'{2**63}' is past the largest"),
        (["memory", "search", "deploy", "-k", str(2**63)], f"'{2**63}' is past the largest"),
    ],
)
def test_the_issue_s_commands_name_the_bad_value(store: Path, args: list[str], named: str) -> None:
    cut = args.index("--") if "--" in args else len(args)  # options before a bare "--"
    res = CliRunner().invoke(main, [*args[:cut], "--db", str(store), *args[cut:]])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    first = res.output.splitlines()[0]
    assert first.startswith("error: ") and named in first, res.output


def test_the_largest_k_a_store_holds_searches_instead_of_overflowing(store: Path) -> None:
    res = CliRunner().invoke(main, ["memory", "search", "deploy", "-k", str(2**63 - 1), "--db", str(store)])
    assert res.exit_code == 0, (res.output, repr(res.exception))
    assert "the deploy window is Friday" in res.output


@pytest.mark.parametrize(
    "target", TARGETS, ids=[f"{' '.join(path)} {param.name}" for path, _c, param in TARGETS]
)
@pytest.mark.parametrize("value", [str(2**63 - 1), str(2**63), str(-(2**63) - 1), "99999999999999999999999"])
def test_each_numeric_flag_at_and_past_the_store_ceiling(
    store: Path, target: tuple[tuple[str, ...], click.Command, click.Parameter], value: str
) -> None:
    """Every flag, not just those the property happens to draw: no traceback, one error line."""
    path, command, param = target
    if path[0] in SERVING and _in_range(param, value):
        return  # a value the flag accepts would start a server
    args = [*path, *invocation(command, param, value, store)]
    res = CliRunner().invoke(main, args, catch_exceptions=True)
    assert "Traceback" not in res.output, (args, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, repr(res.exception))
    assert res.exit_code in (0, 2), (args, res.exit_code, res.output)
    if res.exit_code == 2:
        assert len([line for line in res.output.splitlines() if line.startswith("error:")]) == 1, res.output
