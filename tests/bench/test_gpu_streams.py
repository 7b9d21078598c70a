"""bench/gpu_streams.py runs: a tiny smoke run on the CPU (the real table is measured on a GPU; docs/deployment.md)."""

from __future__ import annotations

import math
import os
import shutil

import pytest

from bench.gpu_streams import main
from tests.conftest import make_test_clip

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg not installed (the test clip)")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu_streams") / "clip.mp4"
    return make_test_clip(path, frames=30, size="320x192", faststart=False)


def test_step_mode_prints_a_row_per_stream_count(clip, capsys, tmp_path):
    rows = main(
        [
            "--video",
            str(clip),
            "--device",
            "cpu",
            "--streams",
            "1",
            "2",
            "--frames",
            "3",
            "--warmup",
            "1",
            "--modes",
            "step",
            "--json",
            str(tmp_path / "rows.json"),
        ]
    )
    assert [(r["mode"], r["streams"], r["frames"]) for r in rows] == [("step", 1, 3), ("step", 2, 3)]
    for r in rows:
        assert r["fps_total"] == pytest.approx(r["streams"] * r["fps_stream"])
        assert r["fps_stream"] > 0 and r["p95_ms"] > 0 and math.isfinite(r["p95_ms"])
        assert r["gpu_util"] == "n/a" and r["gpu_mem"] == "n/a"  # no GPU is measured on the CPU
    out = capsys.readouterr().out
    assert all(r["ego_backend"] == "opencv" for r in rows)  # 'auto' on the CPU, whatever the stream count
    assert "| step   | opencv |   2 |" in out and (tmp_path / "rows.json").is_file()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("AIRPATROL_SOAK") != "1", reason="starts `airpatrol serve`: AIRPATROL_SOAK=1")
def test_serve_mode_counts_live_results(clip):
    [row] = main(["--video", str(clip), "--device", "cpu", "--streams", "1", "--frames", "50", "--modes", "serve"])
    assert row["mode"] == "serve" and row["frames"] > 0 and row["fps_total"] > 0
