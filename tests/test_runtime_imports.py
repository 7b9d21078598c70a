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
RUNTIME = ("edge.service.app", "edge.runner", "edge.batch.worker", "tracking.pipeline", "vision.detection",
           "vision.road.segmenter")


def loaded_after(code: str) -> set[str]:
    """Modules loaded by ``code`` in a fresh interpreter running this tree."""
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(REPO), "YOLO_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def dev_tools(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith(DEV_TOOLS))


def test_the_runtime_path_loads_no_training_or_simulation_code():
    modules = loaded_after("\n".join(f"import {m}" for m in RUNTIME))
    assert set(RUNTIME) <= modules  # the probe did import them
    assert not dev_tools(modules), f"the runtime path imports development tools: {dev_tools(modules)}"


def test_the_cli_loads_a_development_tool_only_when_it_runs():
    run = ("from typer.testing import CliRunner\nfrom edge.cli import app\n"
           "r = CliRunner().invoke(app, {args})\nassert r.exit_code == 0, r.output")
    assert not dev_tools(loaded_after(run.format(args=["process", "--help"])))
    assert "vision.synth.cli" in loaded_after(run.format(args=["synth", "--help"]))  # and the check can see them
    assert "vision.training.road.cli" in loaded_after(run.format(args=["train-road", "--help"]))
