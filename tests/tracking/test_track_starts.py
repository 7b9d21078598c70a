"""A recorded run reports each confirmed track from its first frame (tracking/track_starts.py): results are held back
until the tracks on them are decided; tracks never confirmed stay out."""

from __future__ import annotations

import dataclasses

import numpy as np

from tests.edge.service.service_fakes import BrightBoxDetector
from tests.tracking.test_pipeline_motion_frames import FPS, MOVERS, H, W, _frame, _ground
from tracking.config import PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from tracking.track_starts import TrackStarts, from_first_frame
from tracking.types import INTERPOLATED, FrameResult, TrackState
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


def _tiny_movers_run(lookback: bool) -> list[set[int]]:
    """Indexes of the tiny movers (8x4 px: too small for the stand-in detector, only the motion layer tracks them) on
    which a reported track lies, per frame."""
    p = Pipeline(PipelineConfig(device="cpu", road=RoadConfig(enabled=False)), detector=BrightBoxDetector())
    p.reset(W, H, FPS)
    ground = _ground()
    results = (p.step(Frame(i, i / FPS, _frame(ground, i))) for i in range(60))
    out = []
    for r in from_first_frame(results, p.report_lookback_frames() if lookback else 0):
        i = r.frame.index
        out.append(
            {
                k
                for k, (x0, y, v) in enumerate(MOVERS)
                if any(
                    abs(t.center[0] - (x0 + 200 + v * i + 4)) < 6 and abs(t.center[1] - (y + 2)) < 5 for t in r.tracks
                )
            }
        )
    return out


def test_a_recorded_run_reports_a_motion_only_vehicle_from_its_first_frame():
    live, recorded = _tiny_movers_run(lookback=False), _tiny_movers_run(lookback=True)
    wait = round(PipelineConfig().motion.min_motion_track_s * FPS)
    for k in range(len(MOVERS)):
        first_live = next(i for i, on in enumerate(live) if k in on)
        first_recorded = next(i for i, on in enumerate(recorded) if k in on)
        # live, a track only blobs feed is reported once it has lasted min_motion_track_s; recorded, from its start
        assert first_recorded <= first_live - wait + 1
        assert all(k in on for on in recorded[first_recorded:first_live])  # every frame in between
        assert [k in on for on in recorded[first_live:]] == [k in on for on in live[first_live:]]


def _moving(tid: int, i: int) -> TrackState:
    x = 10.0 * i
    return TrackState(
        tid, np.array([x, 0, x + 20, 10], np.float32), 0.8, 0, speed_kmh=40.0, ground_xy=(x / 10, 0.0), lat=1.0, lon=2.0
    )


def _gap_run(lost_on: dict[int, set[int]], seen_on: set[int], frames: int, moving: bool = True) -> list[FrameResult]:
    """Track 4 reported on ``seen_on``; ``lost_on``: frame -> the ids the tracker had lost there."""
    results = (
        FrameResult(
            Frame(i, i / 25, np.zeros((2, 2, 3), np.uint8)),
            [dataclasses.replace(_moving(4, i), moving=moving)] if i in seen_on else [],
            lost_ids=frozenset(lost_on.get(i, set())),
        )
        for i in range(8)
    )
    return list(from_first_frame(results, frames))


def test_a_track_lost_and_found_again_is_filled_between():
    out = _gap_run({2: {4}, 3: {4}, 4: {4}}, {0, 1, 5, 6, 7}, frames=5)
    assert [r.frame.index for r in out] == list(range(8))
    assert _ids(out) == [[4]] * 8
    for i in (2, 3, 4):  # halfway boxes, positions and lat/lon; no speed: nothing was measured there
        tr = out[i].tracks[0]
        assert np.allclose(tr.xyxy, [10 * i, 0, 10 * i + 20, 10]) and tr.ground_xy == (i, 0.0)
        assert (tr.lat, tr.lon) == (1.0, 2.0) and tr.speed_kmh is None and tr.speed_flag == INTERPOLATED
    assert all(out[i].tracks[0].speed_flag is None for i in (0, 1, 5, 6, 7))


def test_only_gaps_the_tracker_lost_it_in_are_filled_within_the_look_back():
    # frame 3 had the track hidden by a rule (not lost): the gap 2-4 is not the tracker's and stays empty
    assert _ids(_gap_run({2: {4}, 4: {4}}, {0, 1, 5, 6, 7}, frames=5))[2:5] == [[], [], []]
    # the frame before the gap has left the look-back when the track is found again: nothing to fill from
    assert _ids(_gap_run({2: {4}, 3: {4}, 4: {4}}, {0, 1, 5, 6, 7}, frames=3))[2:5] == [[], [], []]
    # live (no look-back): nothing is held, nothing filled
    assert _ids(_gap_run({2: {4}, 3: {4}, 4: {4}}, {0, 1, 5, 6, 7}, frames=0))[2:5] == [[], [], []]
    # lost and never found again: nothing filled
    assert _ids(_gap_run({5: {4}, 6: {4}, 7: {4}}, {0, 1, 2, 3, 4}, frames=5))[5:] == [[], [], []]
    # a standing track (as likely clutter as a parked car): its gaps stay
    assert _ids(_gap_run({2: {4}, 3: {4}, 4: {4}}, {0, 1, 5, 6, 7}, frames=5, moving=False))[2:5] == [[], [], []]


def test_a_gap_is_interpolated_where_the_drones_own_motion_is_taken_out():
    # a parked vehicle at x = 100 (first frame's pixels) while the drone shakes: frame i sees it shifted by -shake[i]
    shake = [0.0, 0.0, 30.0, -20.0, 10.0, 0.0, 0.0, 0.0]

    def result(i: int) -> FrameResult:
        x = 100 - shake[i]
        track = TrackState(4, np.array([x - 10, 0, x + 10, 10], np.float32), 0.8, 0)
        to_first = np.array([[1, 0, shake[i]], [0, 1, 0], [0, 0, 1]], np.float64)
        return FrameResult(
            Frame(i, i / 25, np.zeros((2, 2, 3), np.uint8)),
            [track] if i not in (2, 3, 4) else [],
            lost_ids=frozenset({4} if i in (2, 3, 4) else set()),
            to_first=to_first,
        )

    out = list(from_first_frame((result(i) for i in range(8)), frames=5))
    for i in (2, 3, 4):  # on the vehicle in each frame, not on the straight line between the two ends
        assert np.isclose(out[i].tracks[0].center[0], 100 - shake[i]), (i, out[i].tracks[0].center)
