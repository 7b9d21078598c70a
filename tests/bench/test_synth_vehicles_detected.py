"""bench/synth_vehicles_detected.py: the counting, with a stand-in detector that boxes exactly the trucks it is
shown (the real detector's numbers are the benchmark's business, not a test's)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # bench/ is not an installed package

from bench.synth_vehicles_detected import count, iou_matrix  # noqa: E402
from vision.synth import SceneConfig, build_scene  # noqa: E402
from vision.types import VEHICLE_CLASSES, Detections  # noqa: E402

CASE = (("highway", 11, 60.0, -90.0),)


class TruthTrucks:
    """Boxes every truck of the frame it was told about, as a car."""

    def __init__(self):
        cfg = SceneConfig(
            scene="highway",
            seed=11,
            duration_s=1 / 30.0,
            fps=30.0,
            width=480,
            height=270,
            altitude_m=60.0,
            gimbal_pitch_deg=-90.0,
            traffic_density=1.5,
            use_shared_data="off",
        )
        _, _, boxes = build_scene(cfg).render(0)
        self.trucks = [b for b in boxes if VEHICLE_CLASSES[b.class_id] == "truck" and b.visibility >= 0.7]

    def detect(self, image: np.ndarray) -> Detections:
        xyxy = [[b.left, b.top, b.left + b.width, b.top + b.height] for b in self.trucks]
        n = len(xyxy)
        return Detections(np.array(xyxy).reshape(n, 4), np.ones(n), np.zeros(n, np.int32))


def test_counts_boxed_vehicles_per_class():
    det = TruthTrucks()
    assert det.trucks, "the scene should show a truck in frame 0"
    res = count(det, cases=CASE, frames=(0,), size=(480, 270), use_shared_data="off")
    t = res["tally"]
    assert t[("truck", "in_view")] == t[("truck", "boxed")] == len(det.trucks)
    assert t[("truck", "boxed_as_class")] == 0  # boxed, but named a car
    assert t[("truck", "drawn", "boxed")] == len(det.trucks) and t[("truck", "real", "in_view")] == 0  # no shared data
    assert t[("car", "boxed")] == 0 and t[("car", "in_view")] > 0
    assert res["named"][("truck", "car")] == len(det.trucks)
    assert res["assets"] == ["procedural"]


def test_iou_matrix():
    a = np.array([[0, 0, 10, 10], [20, 20, 30, 30]], float)
    b = np.array([[0, 0, 10, 5]], float)
    assert np.allclose(iou_matrix(a, b), [[0.5], [0.0]])
