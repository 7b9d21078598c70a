"""A run records its inputs so that any folder finds them again: `airpatrol process clip/video.mp4 --out run` (and a
segmented batch run) write the video's and the flight log's absolute path and their path relative to the run folder
into ``summary.json``; :mod:`vision.run_inputs` finds them from another folder, and after the tree moved."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "service"))  # the fake-detector pipeline of the service tests

import service_fakes  # noqa: E402

from vision.run_inputs import run_telemetry, run_video  # noqa: E402


@pytest.fixture
def flight(tmp_path, monkeypatch) -> Path:
    """``tmp_path/a`` with ``clip/video.mp4`` and its DJI ``clip/video.SRT``; the current folder is ``a``."""
    folder = tmp_path / "a"
    (folder / "clip").mkdir(parents=True)
    service_fakes.write_clip(folder / "clip" / "video.mp4", 20)
    service_fakes.write_dji_srt(folder / "clip" / "video.SRT", 20)
    monkeypatch.chdir(folder)
    return folder


def _found_from_elsewhere(tmp_path: Path, monkeypatch, run_rel: str) -> None:
    """From a sibling folder, then with the whole tree moved, the run's video and flight log are found."""
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "b")
    run_dir = Path("../a") / run_rel
    summary = json.loads((run_dir / "summary.json").read_text())
    assert run_video(run_dir, summary) == (tmp_path / "a" / "clip" / "video.mp4").resolve()
    assert run_telemetry(run_dir, summary) == (tmp_path / "a" / "clip" / "video.SRT").resolve()
    shutil.move(tmp_path / "a", tmp_path / "moved")
    run_dir = Path("../moved") / run_rel
    assert run_video(run_dir, summary) == (tmp_path / "moved" / "clip" / "video.mp4").resolve()
    assert run_telemetry(run_dir, summary) == (tmp_path / "moved" / "clip" / "video.SRT").resolve()
    shutil.rmtree(tmp_path / "moved" / "clip")
    assert run_video(run_dir, summary) is None and run_telemetry(run_dir, summary) is None


def test_process_records_its_inputs_for_any_folder(flight, tmp_path, monkeypatch):
    from edge.runner import process_video
    from tracking.config import PipelineConfig

    config = PipelineConfig.model_validate({"calibration": {"metres_per_pixel": service_fakes.METRES_PER_PIXEL}})
    process_video(
        "clip/video.mp4", "run", config, pipeline=service_fakes.make_pipeline(config), write_video=False, progress=False
    )
    summary = json.loads((flight / "run" / "summary.json").read_text())
    assert summary["video"]["path"] == str(flight.resolve() / "clip" / "video.mp4")
    assert summary["video"]["path_from_run"] == "../clip/video.mp4"
    assert summary["telemetry"] == str(flight.resolve() / "clip" / "video.SRT")  # the sidecar log, found by itself
    assert summary["telemetry_from_run"] == "../clip/video.SRT"
    _found_from_elsewhere(tmp_path, monkeypatch, "run")


def test_a_segmented_batch_run_records_them_the_same_way(flight, tmp_path, monkeypatch):
    """The Ray batch's stitched run (edge/batch/segments.py) writes its summary through the same function."""
    from edge.batch.segments import Segment, SegmentOutput, write_run
    from tracking.config import PipelineConfig
    from tracking.types import FrameResult
    from vision.types import Frame

    image = service_fakes.render(0)
    results = [FrameResult(Frame(i, i / service_fakes.FPS, image), []) for i in range(20)]
    stats = {"frames": 20, "ms_per_frame_by_stage": {}, "ego_motion_failures": 0, "detector_tiles": 0}
    out = SegmentOutput(Segment(0, 0, 20, 0), results, stats, "w.pt", "dual_layer", "cpu", 1.0)
    write_run(Path("clip/video.mp4"), Path("runs/video"), PipelineConfig(), [out], results, None, 1.0, 0.0)
    summary = json.loads((flight / "runs" / "video" / "summary.json").read_text())
    assert summary["video"]["path_from_run"] == "../../clip/video.mp4"
    assert summary["telemetry_from_run"] == "../../clip/video.SRT"
    _found_from_elsewhere(tmp_path, monkeypatch, "runs/video")
