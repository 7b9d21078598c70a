"""The runtime path never loads the development tools (training, data set building, the scene generator).

Each check runs in a fresh interpreter and reads ``sys.modules`` after the imports: what the edge service, the
pipeline and `airpatrol process` load must not include ``vision.training`` or ``vision.synth``. The `airpatrol` CLI
registers those commands lazily, so they still work (and load their modules) when asked for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEV_TOOLS = ("vision.training", "vision.synth", "vision.detector")  # vision.detector: the old place of training
RUNTIME = (
    "edge.service.app",
    "edge.runner",
    "edge.batch.worker",
    "tracking.pipeline",
    "vision.detection",
    "vision.road.segmenter",
)


def probe(code: str) -> list:
    """Run ``code`` in a fresh interpreter on this tree; what it printed, one JSON value a line, and last the names
    of every module loaded."""
    code += "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(REPO), "YOLO_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return [json.loads(line) for line in out.stdout.strip().splitlines() if line.startswith("[")]


def loaded_after(code: str) -> set[str]:
    return set(probe(code)[-1])


def dev_tools(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith(DEV_TOOLS))


def test_the_runtime_path_loads_no_training_or_simulation_code():
    modules = loaded_after("\n".join(f"import {m}" for m in RUNTIME))
    assert set(RUNTIME) <= modules  # the probe did import them
    assert not dev_tools(modules), f"the runtime path imports development tools: {dev_tools(modules)}"


def test_the_cli_loads_a_development_tool_only_when_it_runs():
    # One interpreter: `process --help` first (nothing of the tools yet), then `synth --help` and `train-road --help`
    # (their modules now loaded: the commands still work, and the check can see such modules).
    before, modules = probe(
        "import sys, json\nfrom typer.testing import CliRunner\nfrom edge.cli import app\n"
        "def run(*args):\n    r = CliRunner().invoke(app, list(args))\n    assert r.exit_code == 0, r.output\n"
        "run('process', '--help')\n"
        f"print(json.dumps([m for m in sys.modules if m.startswith({DEV_TOOLS!r})]))\n"
        "run('synth', '--help')\nrun('train-road', '--help')"
    )
    assert before == [], f"`airpatrol process` loads development tools: {before}"
    assert {"vision.synth.cli", "vision.training.road.cli"} <= set(modules)
