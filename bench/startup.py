"""How long the command line takes to start: ``tether --help`` and ``tether logs --help`` in fresh
subprocesses (``python -m tether.cli``, which imports what the ``tether`` script imports), next
to the floors they cannot beat: the interpreter alone and ``import tether``.

Run: python -m bench.startup [RUNS]  (default 15; prints, in ms, the median and fastest wall time
and the median CPU time (user + system) of the child, which other load on the machine distorts less)
     python -m bench.startup --smoke  (one run each, without the warm-up: that it runs)
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

CASES: dict[str, list[str]] = {
    "python (interpreter only)": ["-c", "pass"],
    "import tether": ["-c", "import tether"],
    "tether --help": ["-m", "tether.cli", "--help"],
    "tether logs --help": ["-m", "tether.cli", "logs", "--help"],
    "tether chat --help": ["-m", "tether.cli", "chat", "--help"],
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _once(args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run."""
    env = {**os.environ, "COLUMNS": "100"}
    cpu, start = _cpu(), time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start, _cpu() - cpu


def main(runs: int, *, warm: bool = True) -> None:
    print(f"{'command':28} {'median':>8} {'fastest':>8} {'CPU':>8}   ({runs} runs each)")
    for name, args in CASES.items():
        if warm:
            _once(args)  # warm the file cache and the bytecode
        walls, cpus = zip(*(_once(args) for _ in range(runs)), strict=True)
        print(
            f"{name:28} {statistics.median(walls) * 1000:6.0f}ms {min(walls) * 1000:6.0f}ms "
            f"{statistics.median(cpus) * 1000:6.0f}ms"
        )


if __name__ == "__main__":
    if "--smoke" in sys.argv:
        main(1, warm=False)
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
