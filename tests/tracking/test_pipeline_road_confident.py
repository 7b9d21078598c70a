"""road.sure_off_road_max_score: where the U-Net is sure there is no road, weak boxes (clutter on roofs and fields) are
dropped but a vehicle the detector is confident about is kept (parking bays, junction areas the U-Net misses)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

import vision.road.segmenter as segmenter_module
from tests.edge.service.service_fakes import BrightBoxDetector
from tests.tracking.test_pipeline_dual_layer import _texture
from tracking.config import PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from vision.road.unet import RoadUNet, save_checkpoint
from vision.types import Frame

W, H, FPS = 480, 270, 25.0


class _ScoredBoxes(BrightBoxDetector):
    """White boxes; a vehicle-sized one (>= 30 px long) scores 0.9, a smaller one 0.3 (a weak box)."""

    def detect(self, image, road_mask=None, tiling=None):
        dets = super().detect(image, road_mask, tiling)
        dets.score = np.where(dets.wh.max(1) >= 30, 0.9, 0.3).astype(np.float32)
        return dets


@pytest.fixture
def road_only_in_the_middle(tmp_path: Path, monkeypatch) -> str:
    """A real RoadSegmenter whose network output is fixed: road (0.9) in the middle third of the columns, sure no
    road (0.0) elsewhere."""
    path = tmp_path / "tiny_road.pt"
    save_checkpoint(path, RoadUNet(4).eval(), 256, {})

    def fixed_probability(model, image, long_side, device, out_size):
        w, h = out_size
        prob = np.zeros((h, w), np.float32)
        prob[:, w // 3 : 2 * w // 3] = 0.9
        return prob

    monkeypatch.setattr(segmenter_module, "predict_proba", fixed_probability)
    return str(path)


def _reported(weights: str, max_score: float | None) -> set[str]:
    road = RoadConfig(weights=weights, learn_from_tracks=False, sure_off_road_max_score=max_score)
    p = Pipeline(PipelineConfig(device="cpu", road=road), detector=_ScoredBoxes())
    p.reset(W, H, FPS)
    frame = _texture(W, H, 6, 20, 150)
    cv2.rectangle(frame, (30, 100), (69, 115), (255, 255, 255), -1)  # a parked vehicle off the road, 40 px
    cv2.rectangle(frame, (400, 200), (415, 211), (255, 255, 255), -1)  # a weak 16 px box off the road
    cv2.rectangle(frame, (220, 150), (259, 165), (255, 255, 255), -1)  # a vehicle on the road
    seen: set[str] = set()
    for i in range(30):
        for t in p.step(Frame(i, i / FPS, frame.copy())).tracks:
            seen.add("off road" if t.xyxy[0] < 100 else "on road" if t.xyxy[0] < 300 else "weak box off road")
    return seen


def test_a_confident_vehicle_off_the_segmented_road_is_kept(road_only_in_the_middle):
    assert _reported(road_only_in_the_middle, 0.5) == {"off road", "on road"}
    # the previous rule (every box where the U-Net is sure there is no road is dropped) loses the parked vehicle
    assert _reported(road_only_in_the_middle, None) == {"on road"}
