"""A recorded run reports each confirmed track from its first frame (tracking/track_starts.py): results are held back
until the tracks on them are decided; tracks never confirmed stay out."""

from __future__ import annotations

import cv2
import numpy as np

from tests.edge.service.service_fakes import BrightBoxDetector
from tests.tracking.test_pipeline_dual_layer import _texture
from tracking.config import PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from tracking.track_starts import TrackStarts, from_first_frame
from tracking.types import FrameResult, TrackState
from vision.types import Frame


def _state(tid: int) -> TrackState:
    return TrackState(tid, np.array([0, 0, 10, 10], np.float32), 0.5, 0)


def _result(i: int, reported: list[int], withheld: list[int]) -> FrameResult:
    frame = Frame(i, i / 25, np.zeros((2, 2, 3), np.uint8))
    return FrameResult(frame, [_state(t) for t in reported], withheld=[_state(t) for t in withheld])


def _ids(results: list[FrameResult]) -> list[list[int]]:
    return [sorted(tr.track_id for tr in r.tracks) for r in results]


def test_a_confirmed_track_is_reported_from_its_first_frame():
    # track 7 withheld on frames 0-2, reported from frame 3; track 9 withheld on frames 1-2, never confirmed
    plan: list[tuple[list[int], list[int]]] = [([], [7]), ([], [7, 9]), ([], [7, 9]), ([7], []), ([7], [])]
    out = list(from_first_frame((_result(i, r, w) for i, (r, w) in enumerate(plan)), frames=3))
    assert [r.frame.index for r in out] == [0, 1, 2, 3, 4]  # every frame, in order, once
    assert _ids(out) == [[7], [7], [7], [7], [7]]


def test_only_the_look_back_is_reported_and_no_look_back_passes_results_through():
    plan: list[tuple[list[int], list[int]]] = [([], [7])] * 4 + [([7], [])]
    out = list(from_first_frame((_result(i, r, w) for i, (r, w) in enumerate(plan)), frames=2))
    assert _ids(out) == [[], [], [7], [7], [7]]  # withheld longer than the look-back: its first frames stay out
    starts = TrackStarts(0)
    first = _result(0, [], [7])
    assert starts.push(first) == [first] and first.tracks == []  # live: nothing held, nothing rewritten
    assert starts.flush() == []


APPEARS = 4


def _moving_box_run(lookback: bool) -> list[set[int]]:
    """A white car driving across a textured ground, the detector on every 3rd frame: ids reported per frame."""
    w, h, fps = 320, 240, 25.0
    p = Pipeline(PipelineConfig(device="cpu", road=RoadConfig(enabled=False)), detector=BrightBoxDetector())
    p.reset(w, h, fps)
    ground = _texture(w, h, 5, 20, 150)

    def frames():
        for i in range(30):
            img = ground.copy()
            x = 40 + 3 * i
            if i >= APPEARS:  # not on the video's first frame, whose tracks ByteTrack confirms at once
                cv2.rectangle(img, (x, 100), (x + 29, 113), (255, 255, 255), -1)
            yield p.step(Frame(i, i / fps, img))

    results = list(from_first_frame(frames(), p.report_lookback_frames() if lookback else 0))
    return [{tr.track_id for tr in r.tracks} for r in results]


def test_a_recorded_run_reports_a_vehicle_from_the_frame_it_was_first_detected():
    live = _moving_box_run(lookback=False)
    recorded = _moving_box_run(lookback=True)
    first_live = next(i for i, ids in enumerate(live) if ids)
    first_recorded = next(i for i, ids in enumerate(recorded) if ids)
    # live, the tracker's second look confirms it a detector run later; recorded, it is reported from the first look
    assert APPEARS <= first_recorded < first_live
    assert all(len(ids) == 1 for ids in recorded[first_recorded:])  # one track, on every frame from then on
    assert recorded[first_live:] == live[first_live:]  # the frames after confirmation are the same as live
