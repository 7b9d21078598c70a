"""Layers only look down: vision -> tracking -> db -> dashboard -> edge, and no import circles, between packages or
between modules.

Every module of the five packages is parsed (no import runs), and every import is collected: top-level, inside
functions (the lazy imports that keep start-up light), under ``if TYPE_CHECKING``, relative ones, and
``importlib.import_module("...")`` with a literal name. A package may import itself and the packages below it;
anything else fails with the file and line. Between modules, a circle counts even when one side imports lazily (a
lazy import only hides a circle, it does not remove the knot): ``a`` imports ``b`` when it names ``b`` or something
inside ``b`` (``from pkg import b`` names the module ``pkg.b`` when that is one).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Lowest first: a package may import only itself and the packages before it.
LAYERS = ("vision", "tracking", "db", "dashboard", "edge")

# Known upward imports that are accepted for now, as "path/to/module.py -> imported.module" with the reason.
# Empty: keep it so. An entry here needs a comment saying why it cannot follow the layers yet.
ALLOWED: set[str] = set()


@dataclass(frozen=True)
class Import:
    file: str  # relative to the root, with '/'
    line: int
    source: str  # the importing package
    target: str  # the imported module, dotted
    module: str = ""  # the importing module, dotted
    names: tuple[str, ...] = ()  # ``from target import names``

    @property
    def target_package(self) -> str:
        return self.target.split(".")[0]

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.source} imports {self.target}"


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]  # a module's relative imports start from its package
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, name] if name else base)


def collect_imports(root: Path, packages: tuple[str, ...] = LAYERS) -> list[Import]:
    """Every import of a module of ``packages`` under ``root`` that names one of ``packages``."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = _module_name(root, path)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(tree):  # walks function bodies too: lazy imports count
                targets: list[str] = []
                names: tuple[str, ...] = ()
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = _resolve_relative(module, path.name == "__init__.py", node.level, node.module)
                    else:
                        base = node.module or ""
                    targets = [base]
                    names = tuple(alias.name for alias in node.names)
                elif (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    targets = [node.args[0].value]
                for target in targets:
                    if target.split(".")[0] in packages:
                        line = getattr(node, "lineno", 0)  # statements and calls have one
                        found.append(Import(rel, line, package, target, module, names))
    return found


def upward_imports(imports: list[Import], layers: tuple[str, ...] = LAYERS) -> list[Import]:
    return [i for i in imports if layers.index(i.target_package) > layers.index(i.source)]


def package_cycles(imports: list[Import]) -> list[list[str]]:
    """Circles in the package graph (each once, as the packages along it)."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        if i.target_package != i.source:
            graph.setdefault(i.source, set()).add(i.target_package)
    cycles, seen = [], set()

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycle = path[path.index(nxt) :]
                key = frozenset(cycle)
                if key not in seen:
                    seen.add(key)
                    cycles.append([*cycle, nxt])
            else:
                visit(nxt, [*path, nxt])

    for start in sorted(graph):
        visit(start, [start])
    return cycles


def module_graph(root: Path, imports: list[Import], packages: tuple[str, ...] = LAYERS) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (its package's ``__init__`` not implied)."""
    modules = {_module_name(root, p) for package in packages for p in (root / package).rglob("*.py")}

    def deepest_module(dotted: str) -> str | None:
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in modules:
                return ".".join(parts[:n])
        return None

    graph: dict[str, set[str]] = {}
    for i in imports:
        named = [f"{i.target}.{n}" for n in i.names if f"{i.target}.{n}" in modules] or [i.target]
        for target in filter(None, map(deepest_module, named)):
            if target != i.module:
                graph.setdefault(i.module, set()).add(target)
    return graph


def module_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The knots of the module graph: each strongly connected set of two or more modules, sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    knots: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            knot = []
            while True:
                member = stack.pop()
                knot.append(member)
                if member == node:
                    break
            if len(knot) > 1:
                knots.append(sorted(knot))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(knots)


def test_layers_only_look_down():
    imports = collect_imports(REPO)
    assert len(imports) > 100, "the import walk found almost nothing: is it looking in the right place?"
    bad = [i for i in upward_imports(imports) if f"{i.file} -> {i.target}" not in ALLOWED]
    assert not bad, (
        f"upward imports (layers, low to high: {' -> '.join(LAYERS)}); move the code down or the "
        "import up:\n" + "\n".join(map(str, bad))
    )


def test_no_import_circles_between_packages():
    cycles = package_cycles([i for i in collect_imports(REPO) if f"{i.file} -> {i.target}" not in ALLOWED])
    assert not cycles, "import circles between packages:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_circles_between_modules():
    imports = [i for i in collect_imports(REPO) if f"{i.file} -> {i.target}" not in ALLOWED]
    graph = module_graph(REPO, imports)
    assert len(graph) > 100, "the module graph is almost empty: is the walk looking in the right place?"
    knots = module_cycles(graph)
    assert not knots, (
        "import circles between modules (move what both need into a module of its own, below both):\n"
        + "\n".join(" <-> ".join(k) for k in knots)
    )


def test_allowed_exceptions_are_still_needed():
    """An ALLOWED entry whose import is gone must be removed, so the list only shrinks."""
    present = {f"{i.file} -> {i.target}" for i in collect_imports(REPO)}
    assert not ALLOWED - present, f"stale ALLOWED entries: {sorted(ALLOWED - present)}"


# -- the checker itself, on a planted tree: it must catch what it claims to -------------------------------------------


@pytest.fixture
def tree(tmp_path):
    def write(rel: str, text: str = "") -> None:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    for package in LAYERS:
        write(f"{package}/__init__.py")
    return tmp_path, write


def test_checker_catches_top_level_lazy_relative_and_dynamic_upward_imports(tree):
    root, write = tree
    write("vision/a.py", "from tracking.config import X\n")
    write("vision/b.py", "def f():\n    import edge.batch.runtime\n")
    write("db/sub/c.py", "from ...dashboard import app\n")  # relative, climbing out of db
    write("tracking/d.py", "import importlib\nimportlib.import_module('edge.cli')\n")
    write("edge/e.py", "from vision import types\nfrom . import f\n")  # downward and self: fine
    bad = sorted(str(i) for i in upward_imports(collect_imports(root)))
    assert bad == [
        "db/sub/c.py:1: db imports dashboard",
        "tracking/d.py:2: tracking imports edge.cli",
        "vision/a.py:1: vision imports tracking.config",
        "vision/b.py:2: vision imports edge.batch.runtime",
    ]


def test_checker_finds_a_circle(tree):
    root, write = tree
    write("vision/a.py", "from tracking import b\n")
    write("tracking/b.py", "from db import c\n")
    write("db/c.py", "def f():\n    from vision import a\n")
    assert package_cycles(collect_imports(root)) == [["db", "vision", "tracking", "db"]]
    write("db/c.py", "")
    assert package_cycles(collect_imports(root)) == []


def test_checker_finds_a_circle_between_modules_of_one_package(tree):
    root, write = tree
    write("vision/a.py", "from vision.b import thing\n")
    write("vision/b.py", "def f():\n    from vision import a\n")  # lazy, and names the module through its package
    write("vision/c.py", "from . import a\n")  # relative; imports a, not imported back: no circle
    imports = collect_imports(root)
    assert package_cycles(imports) == []  # the package-level check cannot see it
    assert module_cycles(module_graph(root, imports)) == [["vision.a", "vision.b"]]
    write("vision/b.py", "")
    assert module_cycles(module_graph(root, collect_imports(root))) == []


def test_checker_finds_a_longer_module_circle_across_packages_and_type_checking(tree):
    root, write = tree
    write("tracking/x.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tracking.y import Y\n")
    write("tracking/y.py", "import importlib\nimportlib.import_module('tracking.sub.z')\n")
    write("tracking/sub/__init__.py", "")
    write("tracking/sub/z.py", "from ..x import X\nfrom vision import w\n")
    write("vision/w.py", "")
    graph = module_graph(root, collect_imports(root))
    assert graph["tracking.sub.z"] == {"tracking.x", "vision.w"}
    assert module_cycles(graph) == [["tracking.sub.z", "tracking.x", "tracking.y"]]


def test_checker_does_not_take_a_name_from_a_package_init_for_a_module(tree):
    root, write = tree
    write("db/__init__.py", "from db.m import helper\n")
    write("db/m.py", "from db import helper2\n")  # a name of db/__init__.py, which imports db.m: a real circle
    write("db/n.py", "from db import m\n")
    assert module_cycles(module_graph(root, collect_imports(root))) == [["db", "db.m"]]
