"""Layers only look down: vision -> tracking -> db -> dashboard -> edge, and no import circles between packages.

Every module of the five packages is parsed (no import runs), and every import is collected: top-level, inside
functions (the lazy imports that keep start-up light), relative ones, and ``importlib.import_module("...")`` with
a literal name. A package may import itself and the packages below it; anything else fails with the file and line.
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
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = _resolve_relative(module, path.name == "__init__.py", node.level, node.module)
                    else:
                        base = node.module or ""
                    targets = [base]
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
                        found.append(
                            Import(rel, getattr(node, "lineno", 0), package, target)
                        )  # statements and calls have one
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
