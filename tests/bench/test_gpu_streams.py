"""bench/gpu_streams.py runs: a tiny smoke run on the CPU (the real table is measured on a GPU; docs/deployment.md)."""

from __future__ import annotations

import math
import os
import shutil
import time

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


def test_pyav_sends_the_clip_looped_as_a_live_mpegts_stream(clip):
    """The GPU machine has no ffmpeg program: PyAV, in a process of its own, is the live encoder the service pulls
    from. What it sends decodes, at the clip's size, and goes on past the clip's end (looped)."""
    import av

    from bench.gpu_streams import free_port, pyav_source

    port = free_port()
    sender = pyav_source(clip, port)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                container = av.open(f"tcp://127.0.0.1:{port}", timeout=(10.0, 10.0))
                break
            except av.error.FFmpegError:  # not listening yet (the sender's interpreter is starting)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with container:
            frames = [f for f, _ in zip(container.decode(video=0), range(40))]
    finally:
        sender.kill()
        sender.wait()
    assert len(frames) == 40 > 30  # the 30-frame clip, looped
    assert (frames[0].width, frames[0].height) == (320, 192)


def test_push_frames_are_the_folder_jpegs_as_they_are(tmp_path):
    """--live push sends a frame folder's JPEG files unchanged (the bench process encodes nothing)."""
    import cv2
    import numpy as np

    from bench.gpu_streams import jpeg_frames

    (tmp_path / "img").mkdir()
    for i in range(3):
        cv2.imwrite(str(tmp_path / "img" / f"img{i + 1:06d}.jpg"), np.full((16, 24, 3), 40 * i, np.uint8))
    (tmp_path / "seqinfo.ini").write_text("[Sequence]\nimDir=img\nframeRate=12.5\n")
    jpegs, fps = jpeg_frames(tmp_path)
    assert fps == 12.5 and jpegs == [(tmp_path / "img" / f"img{i + 1:06d}.jpg").read_bytes() for i in range(3)]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("AIRPATROL_SOAK") != "1", reason="starts `airpatrol serve`: AIRPATROL_SOAK=1")
@pytest.mark.parametrize("live", ["ffmpeg", "pyav", "push"])
def test_serve_mode_counts_live_results(clip, live):
    [row] = main(
        ["--video", str(clip), "--device", "cpu", "--streams", "1", "--frames", "50", "--modes", "serve"]
        + ["--live", live]
    )
    assert row["mode"] == "serve" and row["live"] == live and "source_errors" not in row
    assert row["frames"] > 0 and row["fps_total"] > 0
