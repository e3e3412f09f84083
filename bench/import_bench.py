"""What merely having contextplane installed costs: ``import contextplane``, ``contextplane
--help``, and the kit's pytest plugin in a pytest run that uses no kit class.

    python bench/import_bench.py [--runs 5] [--json]

Every figure is the median of ``--runs`` fresh subprocesses (bytecode caches warm: one unmeasured
run of each first), so it is what a user pays on every start.

1. ``python -X importtime -c "import contextplane"``: the cumulative microseconds of the
   ``contextplane`` line, the ten heaviest top-level packages it pulls in (their self times
   summed, contextplane's own modules under ``contextplane``), and which heavy packages
   (apsw, cattrs, numpy, sqlite_vec, the store) end up imported. Baseline, same run: the bare
   interpreter (``python -c pass``).
2. Wall time of ``contextplane --help`` (the console script beside this Python, else
   ``python -m contextplane``). Target: under 0.5 s. Baseline, same run: ``python -c "import
   click"``, the floor of any Click program.
3. A pytest run of one trivial test in a temporary directory, with the ``pytest11`` entry point
   ``contextplane`` (the conformance kit's plugin) enabled and with ``-p no:contextplane``,
   alternated run by run: the difference of the medians and their ratio, in wall time and in CPU
   time (user + system; a pytest run with this environment's other plugins takes ~2.5 s, so wall
   time on a shared machine varies by more than the 20 ms looked for), and the plugin's own
   import, timed in a process that has imported pytest (``-X importtime`` cannot see it: pluggy
   loads it through ``importlib``). Target: the plugin adds under 20 ms, judged on its import
   (with one trivial test its hooks cost microseconds; the wall and CPU differences are shown
   because they are what a user sees, but they are noisier than the target on a shared machine).

To measure another tree with the same script (the tree before a change, say), put its source
folders first on ``PYTHONPATH``: every figure is taken in subprocesses, which inherit it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

PY = sys.executable
HEAVY = ("apsw", "cattrs", "numpy", "sqlite_vec", "contextplane.store", "mcp", "starlette", "psycopg")
HELP_TARGET_S = 0.5
PLUGIN_TARGET_MS = 20.0
_IMPORTTIME = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


def _timed(cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one subprocess; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def _wall(cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> float:
    """Seconds one subprocess takes, start to exit; it must succeed."""
    return _timed(cmd, cwd, env)[0]


def _importtime_once() -> tuple[int, dict[str, int]]:
    """The ``contextplane`` line's cumulative µs and every module's self µs, one fresh process."""
    done = subprocess.run([PY, "-X", "importtime", "-c", "import contextplane"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"import contextplane failed:\n{done.stderr}")
    total = 0
    selfs: dict[str, int] = {}
    for line in done.stderr.splitlines():
        m = _IMPORTTIME.match(line)
        if m is None:
            continue
        own, cumulative, _indent, name = int(m[1]), int(m[2]), m[3], m[4]
        selfs[name] = own
        if name == "contextplane":
            total = cumulative
    return total, selfs


def _loaded_heavy() -> list[str]:
    code = (
        "import sys, contextplane\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.split()


def importtime(runs: int) -> dict[str, Any]:
    _importtime_once()
    totals: list[int] = []
    per_package: dict[str, list[int]] = defaultdict(list)
    modules = 0
    for _ in range(runs):
        total, selfs = _importtime_once()
        totals.append(total)
        modules = len(selfs)
        summed: dict[str, int] = defaultdict(int)
        for name, own in selfs.items():
            summed[name.split(".")[0]] += own
        for package, us in summed.items():
            per_package[package].append(us)
    top = sorted(
        ((p, statistics.median(v)) for p, v in per_package.items()), key=lambda pv: pv[1], reverse=True
    )[:10]
    bare = [_wall([PY, "-c", "pass"]) for _ in range(runs)]
    return {
        "contextplane_cumulative_us": statistics.median(totals),
        "modules_imported": modules,
        "top_packages_self_us": dict(top),
        "heavy_loaded": _loaded_heavy(),
        "bare_interpreter_s": statistics.median(bare),
    }


def _help_command() -> list[str]:
    script = Path(PY).parent / "contextplane"
    if script.exists():
        return [str(script), "--help"]
    found = shutil.which("contextplane")
    return [found, "--help"] if found else [PY, "-m", "contextplane", "--help"]


def cli_help(runs: int) -> dict[str, Any]:
    cmd = _help_command()
    _wall(cmd)
    helps: list[float] = []
    clicks: list[float] = []
    for _ in range(runs):
        helps.append(_wall(cmd))
        clicks.append(_wall([PY, "-c", "import click"]))
    median = statistics.median(helps)
    floor = statistics.median(clicks)
    return {
        "command": " ".join(Path(cmd[0]).name if i == 0 else c for i, c in enumerate(cmd)),
        "help_s": median,
        "import_click_s": floor,
        "ratio_vs_click": median / floor,
        "target_s": HELP_TARGET_S,
        "met": median < HELP_TARGET_S,
    }


#: The plugin's import in a process that has pytest already, as every pytest run has.
_PLUGIN_IMPORT = (
    "import time, pytest\n"
    "start = time.perf_counter()\n"
    "import contextplane.testing.pytest_plugin\n"
    "print(time.perf_counter() - start)\n"
)


def _plugin_import_s() -> float:
    done = subprocess.run([PY, "-c", _PLUGIN_IMPORT], capture_output=True, text=True, check=True)
    return float(done.stdout)


def pytest_plugin(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cp-import-bench-") as tmp:
        Path(tmp, "test_trivial.py").write_text("def test_nothing():\n    assert 1 + 1 == 2\n")
        Path(tmp, "pytest.ini").write_text("[pytest]\n")  # the rootdir, whatever lies above it
        base = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_trivial.py"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        on_cmd, off_cmd = base, [*base, "-p", "no:contextplane"]
        _timed(on_cmd, tmp, env)
        _timed(off_cmd, tmp, env)
        on: list[tuple[float, float]] = []
        off: list[tuple[float, float]] = []
        plugin_s: list[float] = []
        for _ in range(runs):
            on.append(_timed(on_cmd, tmp, env))
            off.append(_timed(off_cmd, tmp, env))
            plugin_s.append(_plugin_import_s())
    on_s, off_s = statistics.median(w for w, _ in on), statistics.median(w for w, _ in off)
    on_cpu, off_cpu = statistics.median(c for _, c in on), statistics.median(c for _, c in off)
    import_ms = statistics.median(plugin_s) * 1000
    # The fastest of each arm: what the run costs when nothing else got in its way.
    fastest_ms = (min(w for w, _ in on) - min(w for w, _ in off)) * 1000
    return {
        "with_plugin_s": on_s,
        "without_plugin_s": off_s,
        "added_ms": (on_s - off_s) * 1000,
        "added_fastest_ms": fastest_ms,
        "ratio": on_s / off_s,
        "with_plugin_cpu_s": on_cpu,
        "without_plugin_cpu_s": off_cpu,
        "added_cpu_ms": (on_cpu - off_cpu) * 1000,
        "cpu_ratio": on_cpu / off_cpu,
        "plugin_import_ms": import_ms,
        "target_added_ms": PLUGIN_TARGET_MS,
        # Judged on the import: the wall and CPU differences of two ~2.5 s runs are reported, but
        # on a shared machine their noise is larger than the target.
        "met": import_ms < PLUGIN_TARGET_MS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="subprocesses per figure (median)")
    parser.add_argument("--json", action="store_true", help="print only the JSON")
    args = parser.parse_args()
    result = {
        "python": platform.python_version(),
        "load_average": os.getloadavg()[0],
        "runs": args.runs,
        "import": importtime(args.runs),
        "help": cli_help(args.runs),
        "pytest": pytest_plugin(args.runs),
    }
    if not args.json:
        imp, hlp, pyt = result["import"], result["help"], result["pytest"]
        print(f"median of {args.runs} runs, Python {result['python']}, load {result['load_average']:.2f}")
        print(f"{'figure':<44} {'value':>12}  target")
        print(f"{'import contextplane, cumulative':<44} {imp['contextplane_cumulative_us'] / 1000:>9.1f} ms")
        print(f"{'  modules imported':<44} {imp['modules_imported']:>12}")
        print(f"{'  bare interpreter (python -c pass)':<44} {imp['bare_interpreter_s'] * 1000:>9.1f} ms")
        print(f"{'  heavy modules loaded':<44} {' '.join(imp['heavy_loaded']) or '(none)':>12}")
        print(f"{hlp['command']:<44} {hlp['help_s'] * 1000:>9.1f} ms  < {HELP_TARGET_S * 1000:.0f} ms")
        label = '  python -c "import click"'
        print(f"{label:<44} {hlp['import_click_s'] * 1000:>9.1f} ms")
        print(f"{'  ratio vs import click':<44} {hlp['ratio_vs_click']:>11.2f}x")
        print(
            f"{'pytest, one trivial test, plugin on':<44} {pyt['with_plugin_s'] * 1000:>9.1f} ms"
            f"  (CPU {pyt['with_plugin_cpu_s'] * 1000:.0f} ms)"
        )
        print(
            f"{'  -p no:contextplane':<44} {pyt['without_plugin_s'] * 1000:>9.1f} ms"
            f"  (CPU {pyt['without_plugin_cpu_s'] * 1000:.0f} ms)"
        )
        print(
            f"{'  the plugin adds, wall':<44} {pyt['added_ms']:>9.1f} ms  ({pyt['ratio']:.3f}x; "
            f"fastest runs: {pyt['added_fastest_ms']:.1f} ms)"
        )
        print(
            f"{'  the plugin adds, CPU':<44} {pyt['added_cpu_ms']:>9.1f} ms  < {PLUGIN_TARGET_MS:.0f} ms "
            f"({pyt['cpu_ratio']:.3f}x)"
        )
        print(
            f"{'  its import, pytest already imported':<44} {pyt['plugin_import_ms']:>9.1f} ms  "
            f"< {PLUGIN_TARGET_MS:.0f} ms"
        )
        print("heaviest top-level packages under import contextplane (self time summed):")
        for package, us in imp["top_packages_self_us"].items():
            print(f"  {package:<42} {us / 1000:>9.1f} ms")
        print()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
