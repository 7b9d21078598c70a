"""Motion frames: where the detector is blind to most of the traffic (vehicles a few pixels long, a 1080p nadir view
from high up), the motion layer carries the tracks, the detector runs on every N-th frame only
(``motion.carried_detector_every_n_frames``) and the blobs feed the tracker on the frames between."""

from __future__ import annotations

import cv2
import numpy as np

from tests.tracking.test_pipeline_dual_layer import _CountingDetector as _CountingBrightBoxes
from tracking.config import PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from vision.config import DetectorConfig
from vision.detection import VehicleDetector
from vision.types import Frame

W, H, FPS = 960, 540, 25.0
FRAMES = 80
# tiny movers: 8x4 px (a car seen from ~150 m on a 1080p frame halved), 1.5 px per frame, in both directions
MOVERS = [(60 + 130 * k, 80 + 80 * k, 1.5 if k % 2 else -1.5) for k in range(5)]


def _ground(seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = np.zeros((H, W), np.float32)
    for s in (2, 6, 18, 54):  # fine texture too: the ego-motion needs corners
        small = rng.random((H // s + 2, W // s + 2)).astype(np.float32)
        img += cv2.resize(small, (W, H), interpolation=cv2.INTER_CUBIC)
    img = (img - img.min()) / (img.max() - img.min()) * 170 + 10
    return cv2.cvtColor(img.astype(np.uint8), cv2.COLOR_GRAY2BGR)


def _frame(ground: np.ndarray, i: int, parked: bool = False) -> np.ndarray:
    frame = ground.copy()
    for x0, y, v in MOVERS:
        x = int(round(x0 + 200 + v * i))
        cv2.rectangle(frame, (x, y), (x + 7, y + 3), (255, 255, 255), -1)
    if parked:  # large enough for the stand-in detector (area >= 40 px)
        cv2.rectangle(frame, (850, 450), (869, 459), (255, 255, 255), -1)
    return frame


def _mover_tracks(tracks_by_frame: list[list]) -> dict[int, int]:
    """Mover index -> frames on which a reported track lay on it."""
    seen: dict[int, int] = {}
    for i, tracks in enumerate(tracks_by_frame):
        for k, (x0, y, v) in enumerate(MOVERS):
            cx, cy = x0 + 200 + v * i + 4, y + 2
            if any(abs(t.center[0] - cx) < 6 and abs(t.center[1] - cy) < 5 for t in tracks):
                seen[k] = seen.get(k, 0) + 1
    return seen


class _CountingDetector(VehicleDetector):
    calls = 0

    def detect(self, image, road_mask=None, tiling=None):
        self.calls += 1
        return super().detect(image, road_mask, tiling)


def test_tiny_movers_the_detector_cannot_see_are_carried_by_motion_frames():
    """The shipped detector at its planned scale finds none of the 8x4 px movers; the motion layer tracks every one
    of them, each as one track, while the detector runs on a fraction of the frames only."""
    ground = _ground()
    detector = _CountingDetector(DetectorConfig(), "cpu")
    cfg = PipelineConfig(device="cpu", road=RoadConfig(enabled=False))
    p = Pipeline(cfg, detector=detector)
    p.reset(W, H, FPS)
    reported: list[list] = []
    ids_on: dict[int, set[int]] = {k: set() for k in range(len(MOVERS))}
    for i in range(FRAMES):
        tracks = p.step(Frame(i, i / FPS, _frame(ground, i))).tracks
        reported.append(tracks)
        for k, (x0, y, v) in enumerate(MOVERS):
            cx = x0 + 200 + v * i + 4
            ids_on[k] |= {t.track_id for t in tracks if abs(t.center[0] - cx) < 6 and abs(t.center[1] - y - 2) < 5}
    alone = VehicleDetector(DetectorConfig(), "cpu").detect(_frame(ground, 50))
    assert len(alone) == 0  # blind to them at the scale it plans (here native)
    seen = _mover_tracks(reported)
    # every mover reported on every frame once the blob gate and the 1 s reporting rule have passed (~40 frames:
    # the first frames, detected one by one, find no track to carry), as one track
    assert len(seen) == len(MOVERS) and min(seen.values()) >= FRAMES - 45
    assert all(len(ids) == 1 for ids in ids_on.values())
    assert detector.calls <= 0.35 * FRAMES  # every 8th frame once the motion layer carries the tracks


def test_a_parked_vehicle_the_detector_sees_stays_one_track_on_every_motion_frame():
    """Between detector frames nothing detects the parked vehicle: its track is carried by its prediction and is
    reported on every frame, as one track; with carried_detector_every_n_frames=1 the detector runs on every frame."""
    for every in (5, 1):
        cfg = PipelineConfig(device="cpu", road=RoadConfig(enabled=False))
        cfg.motion.carried_detector_every_n_frames = every
        det = _CountingBrightBoxes()
        p = Pipeline(cfg, detector=det)
        p.reset(W, H, FPS)
        ground = _ground(6)
        parked_ids, parked_frames, frames = set(), 0, 80
        movers = []
        for i in range(frames):
            tracks = p.step(Frame(i, i / FPS, _frame(ground, i, parked=True))).tracks
            movers.append(tracks)
            on = [t.track_id for t in tracks if abs(t.center[0] - 860) < 4 and abs(t.center[1] - 455) < 4]
            parked_ids |= set(on)
            parked_frames += bool(on)
        assert len(parked_ids) == 1 and parked_frames >= frames - 2
        assert len(_mover_tracks(movers)) == len(MOVERS)
        if every == 5:
            assert det.calls <= 0.35 * frames
        else:  # as before motion frames: every frame once the motion layer carries (every 3rd before that)
            assert det.calls >= 0.75 * frames
