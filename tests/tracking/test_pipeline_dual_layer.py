"""Behaviour of the dual layer on synthetic clips: parallax makes no ghost tracks, a stopping vehicle stays one track."""

from __future__ import annotations

import cv2
import numpy as np

from tests.edge.service.service_fakes import BrightBoxDetector
from tracking.config import CalibrationConfig, PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from vision.types import Frame

W, H, FPS = 480, 270, 25.0


def _texture(w: int, h: int, seed: int, lo: int, hi: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = np.zeros((h, w), np.float32)
    for s in (3, 9, 27):
        img += (
            cv2.resize(rng.random((h // s + 2, w // s + 2)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
            * s
        )
    img = (img - img.min()) / (img.max() - img.min()) * (hi - lo) + lo
    return cv2.cvtColor(img.astype(np.uint8), cv2.COLOR_GRAY2BGR)


def _pipeline(**extra) -> Pipeline:
    cfg = PipelineConfig(device="cpu", road=RoadConfig(enabled=False), **extra)
    p = Pipeline(cfg, detector=BrightBoxDetector())
    p.reset(W, H, FPS)
    return p


def test_parallax_of_roofs_under_a_panning_drone_makes_no_tracks():
    """A drone pans over flat ground with small raised structures (roofs, tree tops) whose image motion is 25 %
    larger than the ground's: parallax. Nothing moves on the ground, so nothing may be reported."""
    ground = _texture(W + 400, H, 1, 20, 150)
    roofs = [(_texture(12, 12, 10 + k, 0, 220), 120 + 90 * k, 60 + 50 * (k % 3)) for k in range(5)]  # tree tops
    p = _pipeline()
    reported = []
    for i in range(100):
        pan = 3.0 * i
        frame = ground[:, int(pan) : int(pan) + W].copy()
        for tex, x, y in roofs:
            rx = int(round(x - 1.25 * pan + 300))  # 25 % faster than the ground below it
            if 0 <= rx and rx + 12 <= W:
                frame[y : y + 12, rx : rx + 12] = tex
        reported += p.step(Frame(i, i / FPS, frame)).tracks
    assert reported == []


def test_a_vehicle_that_stops_stays_one_track_and_is_flagged_standing():
    ground = _texture(W, H, 2, 20, 150)
    p = _pipeline(calibration=CalibrationConfig(metres_per_pixel=0.2))
    x, ids, standing = 40.0, [], []
    for i in range(140):
        moving = i < 40 or i >= 100
        if moving:
            x += 2.5  # 0.2 m/px * 2.5 px * 25 fps = 45 km/h
        frame = ground.copy()
        cv2.rectangle(frame, (int(x), 120), (int(x) + 18, 128), (255, 255, 255), -1)
        tracks = p.step(Frame(i, i / FPS, frame)).tracks
        ids += [t.track_id for t in tracks]
        if 70 <= i < 100:
            standing += [t.moving for t in tracks]
    assert len(set(ids)) == 1
    assert len(ids) >= 135  # reported nearly every frame, stopped or not
    assert standing and not any(standing)  # flagged standing while it stands


class _CountingDetector(BrightBoxDetector):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def detect(self, image, road_mask=None, tiling=None):
        self.calls += 1
        return super().detect(image, road_mask, tiling)


def test_detecting_every_third_frame_keeps_one_track_on_every_frame():
    """detector.every_n_frames=3: the detector runs on a third of the frames, the vehicle is still reported on
    (nearly) every frame, on its position, as one track; a parked one stays flagged standing."""
    ground = _texture(W, H, 3, 20, 150)
    cfg = PipelineConfig(
        device="cpu", road=RoadConfig(enabled=False), calibration=CalibrationConfig(metres_per_pixel=0.2)
    )
    cfg.detector.every_n_frames = 3
    det = _CountingDetector()
    p = Pipeline(cfg, detector=det)
    p.reset(W, H, FPS)
    ids, offsets, parked = [], [], []
    for i in range(90):
        x = 40 + 1.5 * i  # a quarter of its length per 3 frames: coasting is safe
        frame = ground.copy()
        cv2.rectangle(frame, (int(x), 120), (int(x) + 18, 128), (255, 255, 255), -1)
        cv2.rectangle(frame, (300, 200), (318, 208), (255, 255, 255), -1)  # parked
        for t in p.step(Frame(i, i / FPS, frame)).tracks:
            ids.append(t.track_id)
            if t.xyxy[1] < 160:
                offsets.append(abs(t.xyxy[0] - int(x)))
            elif i > 60:
                parked.append(t.moving)
    assert 30 <= det.calls <= 33  # every 3rd frame, once the first frames have measured the motion
    assert len(set(ids)) == 2
    assert len(offsets) >= 85 and np.median(offsets) < 1.5 and max(offsets[10:]) < 4
    assert parked and not any(parked)


def test_the_detector_stride_counts_the_frames_a_live_stream_shed():
    """A live stream that sheds frames hands the pipeline frames 1, 2 or 30 apart (pacing, a full queue, the burst
    at its start). The detector runs once the video's own frame numbers say 3 frames passed: frames 2 or more apart
    are each detected (never coasted across a hole where the vehicles moved on), frames 1 apart every 3rd, as in a
    recorded run."""
    ground = _texture(W, H, 3, 20, 150)
    cfg = PipelineConfig(
        device="cpu", road=RoadConfig(enabled=False), calibration=CalibrationConfig(metres_per_pixel=0.2)
    )
    cfg.detector.every_n_frames = 3
    det = _CountingDetector()
    p = Pipeline(cfg, detector=det)
    p.reset(W, H, FPS)

    def step(i: int) -> int:
        frame = ground.copy()
        x = int(40 + 1.5 * i)
        cv2.rectangle(frame, (x, 120), (x + 18, 128), (255, 255, 255), -1)
        before = det.calls
        p.step(Frame(i, i / FPS, frame))
        return det.calls - before

    for i in range(12):  # a steady start: the stride is measured on consecutive frames
        step(i)
    assert [step(i) for i in range(12, 24)].count(1) == 4  # every 3rd frame
    assert [step(i) for i in (30, 60, 64, 68, 71, 74)] == [1, 1, 1, 1, 1, 1]  # 30, 4 and 3 frames apart
    assert [step(i) for i in range(76, 90, 2)] == [1] * 7  # 2 apart: every one (3 // 2 = 1 frame handed over)
    # consecutive again: every 3rd once the tracker's velocity (per frame handed over) is measured again
    assert [step(i) for i in range(90, 150)][-12:].count(1) == 4


def test_small_fast_vehicles_are_detected_on_every_frame():
    """A vehicle that moves half its length per frame would be lost between detector frames: the pipeline notices
    and runs the detector on every frame, and the vehicle stays one track."""
    ground = _texture(W, H, 4, 20, 150)
    cfg = PipelineConfig(
        device="cpu", road=RoadConfig(enabled=False), calibration=CalibrationConfig(metres_per_pixel=0.2)
    )
    cfg.detector.every_n_frames = 3
    det = _CountingDetector()
    p = Pipeline(cfg, detector=det)
    p.reset(W, H, FPS)
    ids = []
    for i in range(60):
        x = 20 + 6.0 * i
        frame = ground.copy()
        cv2.rectangle(frame, (int(x), 120), (int(x) + 12, 126), (255, 255, 255), -1)
        ids += [t.track_id for t in p.step(Frame(i, i / FPS, frame)).tracks]
    assert det.calls >= 50  # after the first detector frames have measured the motion
    assert len(set(ids)) == 1 and len(ids) >= 55


def test_a_fast_new_track_beside_parked_cars_asks_for_every_frame():
    """Parked cars are most of the confirmed tracks, so those alone say "coast". A vehicle found on this pass that
    moves more than its length in three frames (a motorway filmed in 4K at 10 fps) may never be confirmed by a pass
    three frames later: its new track's flow-measured motion asks for the detector on every frame; a slow one does
    not."""
    from vision.types import Detections

    ground = _texture(W, H, 5, 20, 150)
    cfg = PipelineConfig(
        device="cpu", road=RoadConfig(enabled=False), calibration=CalibrationConfig(metres_per_pixel=0.2)
    )
    cfg.detector.every_n_frames = 3
    parked = [(60 + 100 * k, 200, 76 + 100 * k, 208) for k in range(4)]
    for speed, stride in ((9.0, 1), (0.5, 3)):
        p = Pipeline(cfg, detector=_CountingDetector())
        p.reset(W, H, FPS)
        for i in range(12):
            frame = ground.copy()
            for x1, y1, x2, y2 in parked:
                cv2.rectangle(frame, (x1, y1), (x2, y2), (255, 255, 255), -1)
            p.step(Frame(i, i / FPS, frame))
        assert p._detector_stride() == 3  # the parked cars alone: coast
        boxes = np.array([*parked, (20, 100, 38, 108)], np.float32)
        p.tracker.step(Detections(boxes, np.full(len(boxes), 0.9), np.zeros(len(boxes))))
        new = p.tracker.new_tracks()
        assert len(new) == 1
        p.tracker.set_new_velocities(new, np.array([[speed, 0.0]]))  # px a frame, as optical flow measures it
        assert p._detector_stride() == stride


class _PlannedDetector(BrightBoxDetector):
    budget_share: float | None = None  # what VehicleDetector's scale plan reports


def test_the_detector_stride_shortens_where_the_scale_plan_leaves_cpu_budget():
    """detector.stride_follows_scale: a detector pass using a third of the budget (a downscaled nadir frame) runs on
    every 2nd frame (detector.min_every_n_frames; 1 allows every frame); one using all of it (native 1024x540) every
    3rd frame; off, the stride stays 3."""
    on = PipelineConfig(road=RoadConfig(enabled=False))
    on.detector.stride_follows_scale = True
    on.detector.every_n_frames = 3
    every_frame = on.model_copy(deep=True)
    every_frame.detector.min_every_n_frames = 1
    off = PipelineConfig()
    off.detector.every_n_frames = 3
    off.detector.stride_follows_scale = False
    cases = ((on, 0.38, 2), (every_frame, 0.38, 1), (on, 0.98, 3), (on, None, 3), (off, 0.38, 3))
    for config, share, stride in cases:
        det = _PlannedDetector()
        det.budget_share = share
        p = Pipeline(config, detector=det)
        p.reset(1024, 540, 30.0)
        assert p._detector_stride() == stride
