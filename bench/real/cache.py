"""The run cache of ``python -m bench.real`` and ``python -m bench.real.cost``: a result is kept in a JSON file named
by its key (sequence, contender, setting, weights) and a fingerprint of the code the run depends on, so a re-run only
computes what changed."""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def weights_tag(weights: Path) -> str:
    return hashlib.sha256(weights.read_bytes()).hexdigest()[:12]


def code_tag(pipeline: bool = True) -> str:
    """Fingerprint of the code a run depends on: a cached result is reused only for the same code. Plain Ultralytics
    runs depend on the benchmark's plain runner and scoring only (``pipeline=False``), so they survive other edits."""
    from bench.real import contenders

    h = hashlib.sha256()
    h.update((ROOT / "tracking" / "evaluation" / "scoring.py").read_bytes())
    h.update(inspect.getsource(contenders.run_plain_sweep).encode())
    if not pipeline:
        return h.hexdigest()[:12]
    for path in sorted(
        [
            *(ROOT / "vision").rglob("*.py"),
            *(ROOT / "tracking").rglob("*.py"),
            ROOT / "edge" / "runner.py",
            *(ROOT / "bench" / "real").glob("*.py"),
        ]
    ):
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def cached(cache: Path, key: dict, compute, pipeline: bool = True) -> dict:
    key = {**key, "code": code_tag(pipeline)}
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    path = cache / f"{name}.json"
    if path.is_file():
        return json.loads(path.read_text())
    value = compute()
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**value, "key": key}))
    return value
