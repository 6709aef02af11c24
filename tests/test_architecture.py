"""Imports flow only downward (DEVELOPERS.md): a package imports tether.errors and the packages
listed above it, never one below. Imports under ``if TYPE_CHECKING:`` do not run and are allowed.
Imports of another tether package inside functions (cycles dodged by local imports) are not
allowed; lazy loading of a package's own submodule (optional extras) is."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "tether"
LAYERS = [
    "errors",
    "messages",
    "history",
    "models",
    "stores",
    "convert",
    "telemetry",
    "agent",
    "integrations",
    "serve",
    "cli",
]
RANK = {name: i for i, name in enumerate(LAYERS)}


def _package_of(path: Path, src: Path = SRC) -> str:
    rel = path.relative_to(src)
    head = rel.parts[0]
    return head.removesuffix(".py") if len(rel.parts) == 1 else head


def _module_name(path: Path, src: Path) -> str:
    rel = path.relative_to(src.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(node: ast.ImportFrom, path: Path, src: Path) -> str:
    if node.level == 0:
        return node.module or ""
    base = _module_name(path, src).split(".")
    if path.name != "__init__.py":
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(
    tree: ast.AST, path: Path, src: Path, *, typing_too: bool = False
) -> list[tuple[int, str, bool]]:
    """(line, imported module, inside a function) for every import that runs (and, with
    ``typing_too``, the imports under ``if TYPE_CHECKING:`` as well)."""
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not typing_too:
                for other in child.orelse:
                    visit(other, in_function)
                continue
            if isinstance(child, ast.Import):
                found.extend((child.lineno, a.name, in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                found.append((child.lineno, _absolute(child, path, src), in_function))
                # ``from . import _x`` / ``from .pkg import mod`` name submodules too
                base = _absolute(child, path, src)
                found.extend((child.lineno, f"{base}.{a.name}", in_function) for a in child.names)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return found


def violations(src: Path = SRC) -> list[str]:
    problems: list[str] = []
    for path in sorted(src.rglob("*.py")):
        own = _package_of(path, src)
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, module, in_function in _imports(tree, path, src):
            if module != "tether" and not module.startswith("tether."):
                continue
            where = f"{path.relative_to(src.parent)}:{line}"
            target = module.split(".")[1] if "." in module else "__init__"
            # lazy loading inside one package, or of an optional extra by tether/__init__, is fine
            if in_function and target != own and own != "__init__":
                problems.append(f"{where}: local import of {module}")
            if own == "__init__":
                continue  # tether/__init__.py re-exports everything
            if target == "__init__":
                if own == "cli":  # the bottom layer may use the curated public API
                    continue
                problems.append(f"{where}: imports the top-level tether package")
            elif target != own and RANK.get(target, 99) >= RANK.get(own, -1):
                problems.append(f"{where}: {own} may not import {module}")
    return problems


def test_every_module_belongs_to_a_layer() -> None:
    for path in SRC.rglob("*.py"):
        assert _package_of(path) in {*LAYERS, "__init__"}, path


def test_imports_flow_downward() -> None:
    assert violations() == []


def test_the_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / "tether"
    (pkg / "messages").mkdir(parents=True)
    (pkg / "messages" / "bad.py").write_text(
        "from tether.agent import Agent\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tether.cli import x\n"
        "def f():\n    from ..history import y\n"
    )
    found = violations(pkg)
    assert any("messages may not import tether.agent" in v for v in found)
    assert any("local import of tether.history" in v for v in found)
    assert not any("tether.cli" in v for v in found)


_MODULE_STRING = re.compile(r"tether(?:\.\w+)+(?::\w+)?")


def _is_private(module: str) -> bool:
    """``tether.<package>.<...>`` names a module whose name starts with ``_`` below its package."""
    return any(p.startswith("_") and not p.startswith("__") for p in module.split(".")[2:])


def private_imports(src: Path = SRC) -> list[str]:
    """Imports of another package's private modules (``tether.stores._x``, ``from tether.agent
    import _y``), and such modules named in strings (``importlib.import_module``, uvicorn's
    ``"module:attribute"``), counting ``TYPE_CHECKING`` and local imports too: a package is used
    only through its public modules (its ``__init__``, or public subpackages such as
    ``tether.stores.events``). Inside one package, private modules are its own business."""
    problems: list[str] = []
    for path in sorted(src.rglob("*.py")):
        own = _package_of(path, src)
        tree = ast.parse(path.read_text(), filename=str(path))
        named = [(line, module) for line, module, _ in _imports(tree, path, src, typing_too=True)]
        named += [
            (node.lineno, node.value.partition(":")[0])
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _MODULE_STRING.fullmatch(node.value)
        ]
        lines: set[int] = set()
        for line, module in named:  # one finding per line (``from m import a, b`` names m.a, m.b)
            parts = module.split(".")
            if parts[0] != "tether" or len(parts) < 3 or parts[1] == own or line in lines:
                continue
            if _is_private(module):
                lines.add(line)
                problems.append(f"{path.relative_to(src.parent)}:{line}: {own} uses private {module}")
    return problems


def test_packages_meet_only_through_public_modules() -> None:
    assert private_imports() == []


def test_the_private_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / "tether"
    (pkg / "serve").mkdir(parents=True)
    (pkg / "stores").mkdir()
    (pkg / "serve" / "bad.py").write_text(
        "import importlib\n"
        "from tether.stores._events import EventLog\n"
        "from tether.stores.events import _log\n"
        "from tether.stores.events import EventLog\n"
        "from ._own import fine\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tether.agent._run import Run\n"
        "importlib.import_module('tether.stores.postgres._store')\n"
        "APP = 'tether.cli._main:app'\n"
        "OWN = 'tether.serve._main:app'\n"
    )
    (pkg / "stores" / "ok.py").write_text("from tether.stores._common import check_id\n")
    found = private_imports(pkg)
    assert sorted(v.split(": ", 1)[1] for v in found) == [
        "serve uses private tether.agent._run",
        "serve uses private tether.cli._main",
        "serve uses private tether.stores._events",
        "serve uses private tether.stores.events._log",
        "serve uses private tether.stores.postgres._store",
    ]


def type_level_cycles(src: Path = SRC) -> list[list[str]]:
    """Import cycles between the modules of one package, counting every import, those under
    ``if TYPE_CHECKING:`` and inside functions included: two modules that need each other's
    types are one concern split in two, or a collaborator that should take plain values."""
    modules = {_module_name(p, src): p for p in src.rglob("*.py") if p.name != "__init__.py"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = {
            module
            for _, module, _ in _imports(tree, path, src, typing_too=True)
            if module in modules and module != name and module.rsplit(".", 1)[0] == package
        }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_no_type_level_cycles_inside_a_package() -> None:
    assert type_level_cycles() == []


def test_the_cycle_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / "tether" / "agent"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_a.py").write_text("from ._b import B\n")
    (pkg / "_b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import A\n")
    (pkg / "_c.py").write_text("from . import _a\n")
    assert type_level_cycles(tmp_path / "tether") == [
        ["tether.agent._a", "tether.agent._b", "tether.agent._a"]
    ]
