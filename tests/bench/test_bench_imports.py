"""No import circles among the benchmark modules.

``tests/test_architecture.py`` walks the five layer packages only; ``bench/`` sits outside the layers (it may import
anything), but a circle between two of its modules is the same knot there as anywhere. The same checker runs over
``bench/``, with one addition: a script run as ``python bench/x.py`` puts ``bench/`` on ``sys.path`` and imports a
sibling by its bare name (``from stream_bench import start_server``), which counts as importing ``bench.stream_bench``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.test_architecture import REPO, Import, collect_imports, module_cycles, module_graph


def bench_imports(root: Path) -> list[Import]:
    """Every import of a ``bench`` module that names a ``bench`` module, bare sibling names included."""
    scripts = tuple(sorted(p.stem for p in (root / "bench").glob("*.py") if p.stem != "__init__"))
    found = []
    for i in collect_imports(root, ("bench", *scripts)):
        if i.file.startswith("bench/"):
            found.append(i if i.target_package == "bench" else replace(i, target=f"bench.{i.target}"))
    return found


def bench_knots(root: Path) -> list[list[str]]:
    return module_cycles(module_graph(root, bench_imports(root), ("bench",)))


def test_no_import_circles_between_bench_modules():
    graph = module_graph(REPO, bench_imports(REPO), ("bench",))
    assert len(graph) > 5, "the bench module graph is almost empty: is the walk looking in the right place?"
    knots = module_cycles(graph)
    assert not knots, (
        "import circles between bench modules (move what both need into a module of its own, below both):\n"
        + "\n".join(" <-> ".join(k) for k in knots)
    )


def test_the_check_finds_a_lazy_circle_and_one_through_a_bare_sibling_name(tmp_path):
    def write(rel: str, text: str = "") -> None:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    write("bench/__init__.py")
    write("bench/real/__init__.py")
    write("bench/real/__main__.py", "from bench.real.cost import measure\n")
    write("bench/real/cost.py", "def f():\n    from bench.real.__main__ import _cached\n")  # lazy: still a circle
    write("bench/a_bench.py", "import sys\nfrom b_bench import helper\n")  # bare sibling name, as scripts do
    write("bench/b_bench.py", "def g():\n    import a_bench\n")
    write("bench/c_bench.py", "from a_bench import x\nfrom tracking.config import y\n")  # one way only: fine
    assert bench_knots(tmp_path) == [["bench.a_bench", "bench.b_bench"], ["bench.real.__main__", "bench.real.cost"]]
    write("bench/real/cost.py")
    write("bench/b_bench.py")
    assert bench_knots(tmp_path) == []
