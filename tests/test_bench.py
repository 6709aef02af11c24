"""Every benchmark still runs: ``python -m bench.<name> --smoke`` for each module of bench/ (found
by listing the folder, so a new benchmark is covered without a change here), as a subprocess.
Smoke mode runs each measurement at the smallest size that still goes through all of its code,
in seconds; nothing about speed is asserted, only that the module completes and prints its table.
A module whose measurement needs an optional package names it in ``SMOKE_NEEDS``; without it the
case is skipped, except in CI (CI=true), where a missing package fails."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")
TIMEOUT = 150  # seconds for all of them together (a shared 2-core machine; ~40 s when idle)
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _needs(name: str) -> tuple[str, ...]:
    """The packages a module's ``SMOKE_NEEDS = (...)`` names (read from its source, not imported)."""
    tree = ast.parse((BENCH / f"{name}.py").read_text())
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id == "SMOKE_NEEDS":
            assert node.value is not None
            return tuple(ast.literal_eval(node.value))
    return ()


def _honours_smoke(name: str) -> bool:
    """Whether the module reads ``--smoke`` at all (one that does not would run at full size)."""
    return "--smoke" in (BENCH / f"{name}.py").read_text()


def _table(output: str) -> bool:
    """A header line, then a row of several numbers or several rows of one (a column)."""
    rows = [_NUMBER.findall(line) for line in output.splitlines()[1:] if line.strip()]
    return any(len(numbers) >= 2 for numbers in rows) or sum(1 for numbers in rows if numbers) >= 2


@pytest.fixture(scope="module")
def runs() -> dict[str, subprocess.CompletedProcess[str]]:
    """Every module's smoke run, started together (most of their time is waiting: a server's
    start, a model's load) and each bounded by the timeout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    env.pop("COLUMNS", None)
    children: dict[str, subprocess.Popen[str]] = {}
    for name in MODULES:
        missing = [n for n in _needs(name) if importlib.util.find_spec(n) is None]
        if missing or not _honours_smoke(name):
            continue
        children[name] = subprocess.Popen(
            [sys.executable, "-m", f"bench.{name}", "--smoke"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a timeout ends the module and whatever it started
        )
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    deadline = time.monotonic() + TIMEOUT
    try:
        for name, child in children.items():
            try:
                out, err = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                out, err = child.communicate()
                err += f"\n(killed after {TIMEOUT} s)"
            done[name] = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    finally:
        for child in children.values():
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    return done


def test_bench_has_modules() -> None:
    assert {"serve", "codec", "agent", "stores"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_runs_in_smoke_mode(name: str, runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    missing = [n for n in _needs(name) if importlib.util.find_spec(n) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"bench.{name} needs {', '.join(missing)}: CI must run every benchmark")
        pytest.skip(f"bench.{name} needs {', '.join(missing)}")
    assert _honours_smoke(name), f"bench/{name}.py does not take --smoke: give it a smoke mode"
    result = runs[name]
    assert result.returncode == 0, f"bench.{name} --smoke failed:\n{result.stdout}\n{result.stderr[-3000:]}"
    assert _table(result.stdout), f"bench.{name} --smoke printed no table:\n{result.stdout}"
