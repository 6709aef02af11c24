"""Filter the output of a verbose `pip install` that builds llama.cpp (cmake + ninja or make).

    pip install -v ... 2>&1 | python scripts/_build_log.py [--log FILE]

Each build step is shown as one short line, `[24/193] ggml-cpu/binary-ops.cpp` (on a terminal
the line is rewritten in place), instead of the ~1,500-character compiler command line ninja
prints for it; pip's own milestones (Collecting, Building wheel, Successfully ...) pass through;
cmake's configuration chatter is left out. From the first sign of a failure on (a compiler
`error:`, ninja's `FAILED:`, `CMake Error`, pip's `ERROR:` ...) every line is shown, preceded by
the few lines before it, so a failing build still prints the compiler's error; compiler command
lines are shortened there too. `--log FILE` keeps the whole unfiltered output. The exit status
is always 0: the caller takes pip's (`${PIPESTATUS[0]}`). Standard library only: it runs before
anything is installed.
"""

from __future__ import annotations

import argparse
import collections
import re
import shlex
import sys
from typing import TextIO

PROGRESS = re.compile(r"^\s*\[\s*(\d+)(?:/(\d+)|%)\]\s*(.*)$")
FAILURE = re.compile(
    r"\berror:|^\s*FAILED:|CMake Error|ninja: build stopped|make(\[\d+\])?: \*\*\*|^\s*ERROR:"
    r"|\bfatal error\b|^Traceback",
    re.IGNORECASE,
)
KEEP = re.compile(
    r"^\s*(Collecting|Downloading|Building wheel|Created wheel|Successfully|Installing collected"
    r"|Requirement already satisfied: llama)",
)
OBJECT = re.compile(r"Building \w+ object \S*?CMakeFiles/[^/]+\.dir/(\S+?)\.o\b")
LINKING = re.compile(r"Linking \w+ (?:shared |static )?(?:library|executable) (\S+)")
CONTEXT = 20
"""Lines shown from before the first failure, since the last build step (make prints a compiler's
`In file included from ...` before its `error:`)."""
WIDTH = 100


def source_label(path: str) -> str:
    """A source file as the build names it for people: after the last `/src/`, else after the
    project's folder (`vendor/llama.cpp/`), else its name."""
    for marker in ("/src/", "/vendor/llama.cpp/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return path.rsplit("/", 1)[-1]


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # an unbalanced quote: good enough to find -c and -o
        return command.split()


def step_label(command: str) -> str:
    """What one build step does, in a few words: the source it compiles, the library or program
    it links, or the start of a command that is neither."""
    match = OBJECT.search(command)
    if match:
        return match.group(1)  # the source's path within its target
    match = LINKING.search(command)
    if match:
        return f"linking {match.group(1).rsplit('/', 1)[-1]}"
    words = _words(command)
    if "-c" in words[:-1]:
        return source_label(words[words.index("-c") + 1])
    if "-o" in words[:-1]:
        return f"linking {words[words.index('-o') + 1].rsplit('/', 1)[-1]}"
    return shorten(command, WIDTH - 12)


def is_command(line: str) -> bool:
    """A compiler or linker command line (what ninja -v and make VERBOSE=1 print)."""
    return len(line) > WIDTH and line.count(" -D") + line.count(" -I") + line.count(" -f") >= 3


def shorten(line: str, width: int = WIDTH) -> str:
    if is_command(line):
        main = max(line.split("&&"), key=len)  # `cd dir && cc ...`, `: && c++ ... && :`
        words = _words(main)
        indent = line[: len(line) - len(line.lstrip())]
        return f"{indent}{words[0] if words else ''} … ({step_label(main)})"
    return line if len(line) <= width else line[: width - 1] + "…"


class Filter:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.failed = False
        self.before: collections.deque[str] = collections.deque(maxlen=CONTEXT)
        self.pending = False  # a progress line waits to be overwritten (terminal only)

    def _print(self, text: str) -> None:
        if self.pending:
            self.out.write("\n")
            self.pending = False
        self.out.write(text + "\n")
        self.out.flush()

    def _progress(self, text: str) -> None:
        if self.tty:
            self.out.write("\r\033[K" + text[: WIDTH - 1])
            self.pending = True
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def line(self, raw: str) -> None:
        line = raw.rstrip("\r\n")
        progress = PROGRESS.match(line)
        if progress:
            done, total, rest = progress.groups()
            counter = f"[{done}/{total}]" if total else f"[{done:>3}%]"
            if self.failed:  # another job still finishing: a line of its own
                self._print(f"{counter} {step_label(rest)}")
            else:
                self._progress(f"{counter} {step_label(rest)}")
                self.before.clear()  # what came before this step is not about a later failure
            return
        if self.failed:
            self._print(shorten(line, 10_000))
            return
        if FAILURE.search(line):
            self.failed = True
            for earlier in self.before:
                self._print(shorten(earlier, 10_000))
            self._print(shorten(line, 10_000))
            return
        if line.strip():
            self.before.append(line)
        if KEEP.match(line):
            self._print(shorten(line))

    def close(self) -> None:
        if self.pending:
            self.out.write("\n")
            self.out.flush()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Show a llama.cpp build's progress, not its commands.")
    parser.add_argument("--log", help="also write the whole unfiltered output to this file")
    args = parser.parse_args(argv)
    log = open(args.log, "w", encoding="utf-8", errors="replace") if args.log else None  # noqa: SIM115
    out = Filter(sys.stdout)
    try:
        for raw in sys.stdin:
            if log is not None:
                log.write(raw)
            out.line(raw)
    finally:
        out.close()
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    sys.stdin.reconfigure(errors="replace")  # type: ignore[union-attr]
    sys.exit(main(sys.argv[1:]))
