"""pyright infers ``Result[Output]`` from ``output_type`` and checks ``deps`` against ``deps_type``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """
import dataclasses
from tether.agent import Agent
from tether.models.testing import TestModel

@dataclasses.dataclass
class Weather:
    city: str

@dataclasses.dataclass
class Deps:
    user: str

async def main() -> None:
    r1 = await Agent(TestModel()).run("hi")
    reveal_type(r1.output)
    r2 = await Agent(TestModel(), output_type=Weather).run("hi")
    reveal_type(r2.output)
    with_deps = Agent(TestModel(), output_type=Weather, deps_type=Deps)
    reveal_type(with_deps)
    async with with_deps.run_stream("x") as stream:
        reveal_type(stream.result.output)
    reveal_type(with_deps.run_sync("x", deps=Deps("a")))
    await with_deps.run("x", deps=42)
"""


def test_pyright_infers_result_types(tmp_path: Path) -> None:
    pyright = Path(sys.executable).parent / "pyright"
    if not pyright.exists():
        found = shutil.which("pyright")
        if found is None:
            pytest.fail("pyright is not installed (it is a dev dependency)")
        pyright = Path(found)
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET)
    proc = subprocess.run(
        [str(pyright), "--pythonpath", sys.executable, str(source)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout
    assert 'Type of "r1.output" is "str"' in out, out
    assert 'Type of "r2.output" is "Weather"' in out, out
    assert 'Type of "with_deps" is "Agent[Deps, Weather]"' in out, out
    assert 'Type of "stream.result.output" is "Weather"' in out, out
    assert 'is "Result[Weather]"' in out, out
    errors = [line for line in out.splitlines() if " - error: " in line]
    assert len(errors) == 1, out
    assert '"Literal[42]" cannot be assigned to parameter "deps"' in errors[0], out
