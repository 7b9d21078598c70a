"""Long flights in segments: seeking, planning, and stitching track ids back together."""

from __future__ import annotations

import numpy as np
import pytest

from edge.batch.segments import (
    SeekingVideoSource,
    Segment,
    SegmentOutput,
    match_tracks,
    merged_runtime,
    plan_segments,
    run_segment,
    stitch,
)
from tracking.pipeline import Pipeline
from tracking.track_starts import from_first_frame
from tracking.types import FrameResult, TrackState
from vision.source import open_source
from vision.types import Frame


def test_plan_covers_every_frame_once():
    segs = plan_segments(1000, 25.0, segment_s=12.0, overlap_s=2.0)
    assert len(segs) == 4 and segs[0].start == 0 and segs[-1].end == 1000
    assert all(a.end == b.start for a, b in zip(segs, segs[1:]))
    assert segs[0].warmup == 0 and all(s.warmup == 50 for s in segs[1:])
    assert plan_segments(100, 25.0, 60.0, 2.0) == [Segment(0, 0, 100, 0)]


def test_seeking_source_gives_the_same_frames(detector_video):
    with open_source(detector_video, max_frames=70) as src:
        ref = {f.index: f for f in src}
    # the generated clip (no ../shared) is shorter than the real one: seek into its last part, whatever its length
    end = len(ref)
    start = end * 3 // 5
    assert start > 0
    with SeekingVideoSource(detector_video, start, end) as src:
        got = list(src)
    assert [f.index for f in got] == list(range(start, end))
    for f in got:
        assert f.t == pytest.approx(ref[f.index].t, abs=1e-6)
        assert np.array_equal(f.image, ref[f.index].image)


def _result(index: int, boxes: dict[int, tuple]) -> FrameResult:
    tracks = [TrackState(tid, np.array(b, np.float32), 0.9, 0) for tid, b in boxes.items()]
    return FrameResult(Frame(index, index / 25, np.zeros((0, 0, 3), np.uint8)), tracks)


def test_match_tracks_by_overlap():
    earlier = [_result(i, {5: (10 + i, 10, 30 + i, 20), 6: (100, 100, 120, 110)}) for i in range(10)]
    later = [
        _result(i, {1: (11 + i, 10, 31 + i, 20), 2: (300, 300, 320, 310), 3: (100, 100, 120, 110)})
        for i in range(6, 14)
    ]
    assert match_tracks(earlier, later) == {1: 5, 3: 6}  # 2 is a new vehicle
    shifted = [_result(i, {1: (16 + i, 10, 36 + i, 20)}) for i in range(6, 14)]  # IoU 0.6 over 4 frames: same
    assert match_tracks(earlier, shifted) == {1: 5}
    late = [_result(9, {4: (16 + 9, 10, 36 + 9, 20)})]  # one common frame needs a closer match
    assert match_tracks(earlier, late) == {}
    assert match_tracks(earlier, [_result(9, {4: (19.5, 10, 39.5, 20)})]) == {4: 5}


def _output(segment: Segment, vehicles: dict[int, tuple[int, int, float, float]]) -> SegmentOutput:
    """A segment's results: ``{local id: (first frame, last frame, x, y)}``, each vehicle driving right."""
    results = []
    for i in range(segment.start - segment.warmup, segment.end):
        boxes = {tid: (x + 4 * i, y, x + 4 * i + 20, y + 10) for tid, (a, b, x, y) in vehicles.items() if a <= i <= b}
        results.append(_result(i, boxes))
    stats = {"frames": len(results), "ms_per_frame_by_stage": {}, "ego_motion_failures": 0, "detector_tiles": 0}
    return SegmentOutput(segment, results, stats, "w.pt", "dual_layer", "cpu", 1.0)


def test_a_segmented_run_states_its_workers_detector_runtime_and_says_when_they_differ():
    """Workers pick their runtime by their own CPU ('auto'): the run's summary says which ran its detector, and
    where two workers differed, each segment's (their tracks may differ at the seams)."""
    ov = {"runtime": "openvino", "pixels_per_onnx_pixel": 1.8}
    ort = {"runtime": "onnx", "pixels_per_onnx_pixel": 1.0}
    a, b = _output(Segment(0, 0, 30, 0), {}), _output(Segment(1, 30, 60, 10), {})
    a.detector_runtime, b.detector_runtime = ov, dict(ov)
    assert merged_runtime([b, a]) == ov
    b.detector_runtime = ort
    assert merged_runtime([b, a]) == {"runtime": "mixed", "pixels_per_onnx_pixel": None, "segments": [ov, ort]}
    a.detector_runtime = b.detector_runtime = None  # a detector that does not say (a test's fake)
    assert merged_runtime([a, b]) == {"runtime": None, "pixels_per_onnx_pixel": None}


def test_stitch_keeps_ids_and_reports_each_frame_once():
    first = _output(Segment(0, 0, 30, 0), {3: (0, 59, 0.0, 50.0), 4: (0, 10, 200.0, 90.0)})
    second = _output(Segment(1, 30, 60, 10), {1: (20, 59, 0.7, 50.5), 2: (35, 59, 300.0, 90.0)})  # its own ids
    stitched = stitch([second, first])  # any order
    assert [r.frame.index for r in stitched] == list(range(60))
    ids = {r.frame.index: {t.track_id for t in r.tracks} for r in stitched}
    car = ids[0] & ids[59]  # the vehicle seen through the whole flight
    assert len(car) == 1 and all(car <= ids[i] for i in range(60))
    early, late = ids[0] - car, ids[40] - car
    assert len(early) == 1 and len(late) == 1 and early != late  # new vehicle after the boundary: a new id


@pytest.mark.slow  # three pipeline runs over 60 frames
def test_segments_of_a_real_video_run_and_stitch(lean_config, detector_video):
    cfg = lean_config.model_dump(mode="json")
    outputs = [run_segment(str(detector_video), cfg, s) for s in (Segment(0, 0, 30, 0), Segment(1, 30, 60, 20))]
    assert [[r.frame.index for r in o.results] for o in outputs] == [list(range(30)), list(range(10, 60))]
    assert outputs[0].detector_runtime == outputs[1].detector_runtime  # one worker: one runtime
    assert outputs[0].detector_runtime["runtime"] in {"torch", "onnx", "openvino"}
    stitched = stitch(outputs)
    assert [r.frame.index for r in stitched] == list(range(60))
    for r in stitched:
        assert len({t.track_id for t in r.tracks}) == len(r.tracks)
    # the first segment's frames are what a recorded run of the video computes (each confirmed track reported from
    # its first frame, a track's lost frames filled): a plain step loop reports tracks as a live feed does
    pipe = Pipeline(lean_config)
    with open_source(detector_video, max_frames=60) as src:
        pipe.reset(src.info.width, src.info.height, src.info.fps)
        ref = list(from_first_frame((pipe.step(f) for f in src), pipe.report_lookback_frames()))
    # (up to the hold-back before the segment's end: a track born later is confirmed only after it)
    settled = 30 - pipe.report_lookback_frames()
    assert settled >= 5
    assert [len(r.tracks) for r in stitched[:settled]] == [len(r.tracks) for r in ref[:settled]]
