"""The llama.cpp build's output as ./scripts/setup-and-chat and ./scripts/test show it: one short
line per build step (``[24/193] ggml-cpu/binary-ops.cpp``), not ninja's ~1,500-character
compiler command lines, and a failing build still shows the compiler's error and ends non-zero.

The input is a verbose ``pip install`` of llama-cpp-python as pip 24 / scikit-build-core /
CMake + ninja -v print it (the lines are built here around a temporary folder, the way pip's
temporary build folder appears in them); the shell function is run with a stand-in for pip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILTER = ROOT / "scripts" / "_build_log.py"
TOTAL = 193

DEFINES = (
    "-DGGML_BACKEND_BUILD -DGGML_BACKEND_SHARED -DGGML_SCHED_MAX_COPIES=4 -DGGML_SHARED "
    "-DGGML_USE_CPU_AARCH64 -DGGML_USE_LLAMAFILE -DGGML_USE_OPENMP -D_GNU_SOURCE -D_XOPEN_SOURCE=600 "
    "-Dggml_cpu_EXPORTS"
)
FLAGS = (
    "-O3 -DNDEBUG -std=gnu++17 -fPIC -Wmissing-declarations -Wmissing-noreturn -Wall -Wextra -Wpedantic "
    "-Wcast-qual -Wno-unused-function -Wunreachable-code-break -Wunreachable-code-return "
    "-Werror=implicit-int -Werror=implicit-function-declaration -march=native -mno-amx-tile -mno-amx-int8 "
    "-mno-amx-bf16 -fopenmp"
)
SOURCES = [
    "ggml/src/ggml.c",
    "ggml/src/ggml-alloc.c",
    "ggml/src/ggml-backend.cpp",
    *(f"ggml/src/ggml-cpu/{name}.cpp" for name in ("ops", "vec", "unary-ops", "repack", "traits")),
    "ggml/src/ggml-cpu/binary-ops.cpp",
    "src/llama-model.cpp",
    "src/llama-vocab.cpp",
    "tools/mtmd/clip.cpp",
]


def _compile(root: Path, n: int, source: str) -> str:
    project = root / "vendor" / "llama.cpp"
    includes = " ".join(
        f"-I{project}/{d}"
        for d in ("ggml/src/..", "ggml/src/.", "ggml/src/ggml-cpu", "ggml/include", "include")
    )
    target = "ggml-cpu" if "ggml-cpu" in source else "llama" if source.startswith("src") else "ggml-base"
    obj = f"vendor/llama.cpp/ggml/src/CMakeFiles/{target}.dir/{source.split('/src/')[-1]}.o"
    compiler = "/usr/bin/cc" if source.endswith(".c") else "/usr/bin/c++"
    return (
        f"  [{n}/{TOTAL}] {compiler} {DEFINES} {includes} {FLAGS} -MD -MT {obj} -MF {obj}.d -o {obj} "
        f"-c {project}/{source}"
    )


def _head(root: Path) -> list[str]:
    return [
        f"Using pip 24.3.1 from {root}/venv/lib/python3.11/site-packages/pip (python 3.11)",
        "Collecting llama-cpp-python>=0.3.0",
        "  Downloading llama_cpp_python-0.3.36.tar.gz (50.1 MB)",
        "  Running command pip subprocess to install build dependencies",
        "  Running command Building wheel for llama-cpp-python (pyproject.toml)",
        "  *** scikit-build-core 0.11.1 using CMake 3.31.6 (wheel)",
        "  *** Configuring CMake...",
        "  -- The C compiler identification is GNU 12.2.0",
        "  -- Looking for strerror_r - found",
        "  -- Performing Test GGML_COMPILER_SUPPORTS_FP16_FORMAT_I3E - Failed",
        "  -- Configuring done (3.2s)",
        f"  -- Build files have been written to: {root}/build",
        "  *** Building project with Ninja...",
        f"  Change Dir: '{root}/build'",
        "  Run Build Command(s): /usr/bin/ninja -v",
    ]


def _steps(root: Path, upto: int) -> list[str]:
    lines: list[str] = []
    for n in range(1, upto + 1):
        lines.append(
            _compile(root, n, SOURCES[n % len(SOURCES)] if n != 24 else "ggml/src/ggml-cpu/binary-ops.cpp")
        )
        if n == 5:  # a warning of a successful build: not worth a line
            lines += [
                f"  {root}/vendor/llama.cpp/ggml/src/ggml.c:1532:13: warning: unused variable 'k' [-Wunused]",
                "   1532 |     int k = 0;",
                "        |         ^",
            ]
    return lines


def successful(root: Path) -> str:
    link = (
        f"  [{TOTAL}/{TOTAL}] : && /usr/bin/c++ -fPIC -O3 -DNDEBUG -shared -Wl,-soname,libllama.so "
        "-o bin/libllama.so vendor/llama.cpp/src/CMakeFiles/llama.dir/llama.cpp.o "
        "-Wl,-rpath,'$ORIGIN' bin/libggml.so bin/libggml-cpu.so bin/libggml-base.so && :"
    )
    tail = [
        "  *** Installing project into wheel...",
        "  Building wheel for llama-cpp-python (pyproject.toml) ... done",
        "  Created wheel for llama-cpp-python: filename=llama_cpp_python-0.3.36-cp311-linux_x86_64.whl",
        "Successfully built llama-cpp-python",
        "Installing collected packages: llama-cpp-python",
        "Successfully installed llama-cpp-python-0.3.36",
    ]
    return "\n".join([*_head(root), *_steps(root, TOTAL - 1), link, *tail]) + "\n"


ERROR = "error: 'ggml_vec_dot_q4_0_q8_0_fast' was not declared in this scope; did you mean 'ggml_vec_dot'?"


def failing(root: Path) -> str:
    failed = _compile(root, 58, "src/llama-model.cpp")
    lines = [
        *_head(root),
        *_steps(root, 57),
        "  FAILED: vendor/llama.cpp/src/CMakeFiles/llama.dir/llama-model.cpp.o",
        "  " + failed.split("] ", 1)[1],
        f"  {root}/vendor/llama.cpp/src/llama-model.cpp: In function 'void llm_build(int)':",
        f"  {root}/vendor/llama.cpp/src/llama-model.cpp:4242:9: {ERROR}",
        "   4242 |         ggml_vec_dot_q4_0_q8_0_fast(n, s, bs, vx, bx, vy, by, nrc);",
        "        |         ^~~~~~~~~~~~~~~~~~~~~~~~~~~",
        _compile(root, 59, "src/llama-vocab.cpp"),  # a parallel job still finishing
        "  ninja: build stopped: subcommand failed.",
        "",
        "  *** CMake build failed",
        "  error: subprocess-exited-with-error",
        "",
        "  × Building wheel for llama-cpp-python (pyproject.toml) did not run successfully.",
        "  │ exit code: 1",
        "  ╰─> See above for output.",
        "ERROR: Failed building wheel for llama-cpp-python",
        "ERROR: Failed to build installable wheels for some pyproject.toml based projects (llama-cpp-python)",
    ]
    return "\n".join(lines) + "\n"


def _filter(text: str, log: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(FILTER), "--log", str(log)],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_sample_is_what_the_issue_saw(tmp_path: Path) -> None:
    """The recorded-style lines are the ~1,500-character command lines of the report."""
    assert len(_compile(tmp_path, 24, "ggml/src/ggml-cpu/binary-ops.cpp")) > 1_000


def test_a_build_shows_one_short_line_per_step(tmp_path: Path) -> None:
    text = successful(tmp_path / "pip-build-env")
    out = _filter(text, tmp_path / "build.log")
    lines = out.splitlines()
    assert "[24/193] ggml-cpu/binary-ops.cpp" in lines
    assert "[1/193] ggml-alloc.c" in lines  # the part after the last /src/
    assert "[9/193] llama-model.cpp" in lines
    assert "[11/193] tools/mtmd/clip.cpp" in lines  # no /src/: the path in the project
    assert "[12/193] ggml.c" in lines
    assert f"[{TOTAL}/{TOTAL}] linking libllama.so" in lines
    assert sum(1 for line in lines if line.startswith("[")) == TOTAL
    assert max(len(line) for line in lines) <= 100
    assert "Successfully installed llama-cpp-python-0.3.36" in lines
    assert not any("-D" in line or "warning" in line or "-- " in line for line in lines), out
    assert (tmp_path / "build.log").read_text() == text  # everything, unfiltered


def test_a_failing_build_shows_the_compiler_error(tmp_path: Path) -> None:
    root = tmp_path / "pip-build-env"
    out = _filter(failing(root), tmp_path / "build.log")
    lines = out.splitlines()
    assert "[57/193] llama-model.cpp" in lines
    assert "[59/193] llama-vocab.cpp" in lines  # a parallel job finishing after the failure
    at = next(i for i, line in enumerate(lines) if ERROR in line)
    assert lines[at] == f"  {root}/vendor/llama.cpp/src/llama-model.cpp:4242:9: {ERROR}"
    assert lines[at + 1].strip().startswith("4242 |         ggml_vec_dot_q4_0_q8_0_fast(")
    assert lines[at + 2].strip() == "|         ^~~~~~~~~~~~~~~~~~~~~~~~~~~"
    assert "  FAILED: vendor/llama.cpp/src/CMakeFiles/llama.dir/llama-model.cpp.o" in lines
    assert "  /usr/bin/c++ … (llama-model.cpp)" in lines  # the failed command, shortened
    assert "  ninja: build stopped: subcommand failed." in lines
    assert "ERROR: Failed building wheel for llama-cpp-python" in lines
    assert not any("-DGGML" in line for line in lines)  # no command line in full


def test_a_make_build_and_its_failure(tmp_path: Path) -> None:
    """Without ninja, CMake's Makefiles: percentages, the command on a line of its own (dropped
    while all is well), and the error after the headers that led to it."""
    root = tmp_path / "pip-build-env"
    command = _compile(root, 1, "ggml/src/ggml-cpu/binary-ops.cpp").split("] ", 1)[1]
    text = "\n".join(
        [
            "  [ 41%] Building CXX object "
            "vendor/llama.cpp/ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/ops.cpp.o",
            f"  cd {root}/build/vendor/llama.cpp/ggml/src && {command}",
            "  [ 42%] Building CXX object "
            "vendor/llama.cpp/ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/binary-ops.cpp.o",
            f"  cd {root}/build/vendor/llama.cpp/ggml/src && {command}",
            f"  In file included from {root}/vendor/llama.cpp/ggml/src/ggml-cpu/binary-ops.cpp:1:",
            f"  {root}/vendor/llama.cpp/ggml/src/ggml-cpu/binary-ops.h:9:10: "
            "fatal error: simd.h: No such file",
            "  compilation terminated.",
            "  gmake[2]: *** [ggml/src/CMakeFiles/ggml-cpu.dir/build.make:76: binary-ops.cpp.o] Error 1",
            "ERROR: Failed building wheel for llama-cpp-python",
        ]
    )
    lines = _filter(text, tmp_path / "build.log").splitlines()
    assert lines[:2] == ["[ 41%] ggml-cpu/ops.cpp", "[ 42%] ggml-cpu/binary-ops.cpp"]
    assert lines[2] == "  /usr/bin/c++ … (ggml-cpu/binary-ops.cpp)"  # the last command before the error
    assert lines[3].startswith("  In file included from ")
    assert lines[4].endswith("fatal error: simd.h: No such file")
    assert lines[-1] == "ERROR: Failed building wheel for llama-cpp-python"


def _stand_in(tmp_path: Path, sample: str, status: int) -> Path:
    """A python that answers ``-m pip`` with ``sample`` and ``status`` (and records its
    arguments); anything else goes to the real interpreter (the filter)."""
    (tmp_path / "sample.txt").write_text(sample)
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then\n'
        f'  echo "$@" > "{tmp_path}/pip-args"; cat "{tmp_path}/sample.txt"; exit {status}\n'
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    return python


@pytest.mark.parametrize("status", [0, 1])
def test_the_scripts_function_keeps_pips_exit_status(tmp_path: Path, status: int) -> None:
    """``tether_llama_pip`` (what both scripts build with) under ``set -euo pipefail`` as they
    run: the filtered output, pip's exit status, the log; pip ran verbosely."""
    sample = failing(tmp_path) if status else successful(tmp_path)
    python = _stand_in(tmp_path, sample, status)
    log = tmp_path / "llama-build.log"
    script = (
        "set -euo pipefail\n"
        f'source "{ROOT}/scripts/_llama.sh"\n'
        f'tether_llama_pip "{python}" "{log}" --progress-bar on -e ".[local]"\n'
        'echo "after: $?"\n'
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode == status, done.stderr
    assert log.read_text() == sample
    assert (tmp_path / "pip-args").read_text().split()[:4] == ["-m", "pip", "install", "-v"]
    assert "[24/193] ggml-cpu/binary-ops.cpp" in done.stdout.splitlines()
    if status:
        assert ERROR in done.stdout
        assert f"whole output is in {log}" in done.stderr
        assert "after:" not in done.stdout  # set -e stops the script at the failed build
    else:
        assert "after: 0" in done.stdout


def test_both_scripts_build_through_the_filter() -> None:
    for script in ("setup-and-chat", "_ensure_env.sh"):
        text = (ROOT / "scripts" / script).read_text()
        assert "tether_llama_pip " in text, script
        assert "grep --line-buffered" not in text, script
