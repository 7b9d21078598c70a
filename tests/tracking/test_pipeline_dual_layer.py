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
        img += cv2.resize(rng.random((h // s + 2, w // s + 2)).astype(np.float32), (w, h),
                          interpolation=cv2.INTER_CUBIC) * s
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
        frame = ground[:, int(pan):int(pan) + W].copy()
        for tex, x, y in roofs:
            rx = int(round(x - 1.25 * pan + 300))  # 25 % faster than the ground below it
            if 0 <= rx and rx + 12 <= W:
                frame[y:y + 12, rx:rx + 12] = tex
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
