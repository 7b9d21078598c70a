"""``pipeline.overlap_stages``: the size prior's measurements and the motion layer's background update run in a
helper thread beside other stages; every result is waited for where it is used, so the tracks, boxes and speeds are
exactly those of the stages run in turn."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from tests.edge.service.service_fakes import BrightBoxDetector
from tracking.config import EgoMotionConfig, PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from vision.types import Frame

W, H, FPS = 480, 270, 25.0


@pytest.fixture(autouse=True)
def one_torch_thread():  # the road U-Net's CPU threads spin against the helper thread on a loaded two-core machine
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _clip(n: int) -> list[Frame]:
    """A panning drone over textured ground; six white cars the detector sees (enough for the size prior), a small
    dark one only the motion layer sees."""
    rng = np.random.default_rng(11)
    ground = np.zeros((H, W + 200), np.float32)
    for s in (3, 9, 27):
        noise = rng.random((H // s + 2, (W + 200) // s + 2)).astype(np.float32)
        ground += cv2.resize(noise, (W + 200, H), interpolation=cv2.INTER_CUBIC) * s
    ground = cv2.cvtColor(((ground - ground.min()) / np.ptp(ground) * 130 + 20).astype(np.uint8), cv2.COLOR_GRAY2BGR)
    frames = []
    for i in range(n):
        pan = 2 * i
        img = ground[:, pan : pan + W].copy()
        cars = [(40, 30, 3.0), (60, 60, 2.5), (420, 90, -2.0), (100, 120, 3.5), (380, 150, -3.0), (20, 180, 2.0)]
        for k, (x0, y, v) in enumerate(cars):
            x = int(x0 + v * i)
            cv2.rectangle(img, (x, y), (x + 18 + k, y + 8), (255, 255, 255), -1)
        xs = int(300 - 4.0 * i)  # 2 px a frame over the ground, against the pan
        cv2.rectangle(img, (xs, 230), (xs + 10, 235), (0, 0, 0), -1)
        frames.append(Frame(i, i / FPS, img))
    return frames


def _run(frames: list[Frame], overlap: bool) -> tuple[list[tuple], Pipeline]:
    # no calibration: the speeds come from the size prior, which the helper thread feeds. A fixed road that leaves
    # out the bottom of the frame, where the small dark car drives: the motion field, computed without the road in
    # the helper thread, must be restricted to it afterwards as in turn
    road = RoadConfig(polygon=[(0, 0), (W, 0), (W, 200), (0, 200)])
    cfg = PipelineConfig(device="cpu", road=road, ego_motion=EgoMotionConfig(max_features=200), overlap_stages=overlap)
    p = Pipeline(cfg, detector=BrightBoxDetector())
    p.reset(W, H, FPS)
    out = []
    for f in frames:
        r = p.step(f)
        out.append(
            (
                [t.track_id for t in r.tracks],
                np.array([t.xyxy for t in r.tracks]).round(3).tolist(),
                [None if t.speed_kmh is None else round(t.speed_kmh, 6) for t in r.tracks],
                r.scale_detail,
            )
        )
    return out, p


def test_overlapped_stages_give_the_results_of_the_stages_in_turn():
    frames = _clip(70)
    in_turn, _ = _run(frames, overlap=False)
    overlapped, p = _run(frames, overlap=True)
    assert overlapped == in_turn
    # the run exercised what the helper thread does: tracks with speeds (size prior) and motion-layer tracks
    assert sum(len(ids) for ids, *_ in in_turn) > 100
    assert any(s is not None for _, _, speeds, _ in in_turn for s in speeds)
    assert p.stats()["ms_per_frame_by_stage"].get("sizes_wait") is not None
    # the size prior read from outside sees every frame's measurements (the last one waited for)
    assert p.scale is p.scale


def test_a_failure_in_the_helper_thread_surfaces_in_the_next_step():
    frames = _clip(12)
    cfg = PipelineConfig(device="cpu", ego_motion=EgoMotionConfig(max_features=200), overlap_stages=True)
    p = Pipeline(cfg, detector=BrightBoxDetector())
    p.reset(W, H, FPS)
    for f in frames[:6]:
        p.step(f)

    def broken(*_args, **_kw):
        raise RuntimeError("measurement failed")

    p.scale.observe_vehicles = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="measurement failed"):
        for f in frames[6:]:
            p.step(f)
    # the next video starts clean: what the helper thread still held of the last one is not raised again
    p.reset(W, H, FPS)
    for f in frames[:3]:
        p.step(f)


def test_motion_field_restricted_afterwards_equals_restricted_at_once():
    """What the helper thread computes (the field without the road) restricted to the road afterwards is the field
    the motion layer computes with the road."""
    from vision.motion import MotionDetector

    frames = _clip(10)
    greys = [cv2.cvtColor(f.image, cv2.COLOR_BGR2GRAY) for f in frames]
    shift = np.array([[1.0, 0, -2.0], [0, 1, 0], [0, 0, 1]])  # the pan: 2 px a frame
    road = np.zeros((H, W), np.uint8)
    road[:200] = 255
    p = Pipeline(PipelineConfig(device="cpu", road=RoadConfig(enabled=False)), detector=BrightBoxDetector())
    at_once, later = MotionDetector(), MotionDetector()
    for g in greys:
        a = at_once.update(g, shift, 1.0, road)
        b = p._on_road(later.update(g, shift, 1.0, None), road)
        assert np.array_equal(a.mask, b.mask) and np.array_equal(a.unrestricted, b.unrestricted)
    assert a.unrestricted is not None and a.unrestricted[200:].any()  # foreground off the road: the test can tell
    assert not a.mask[200:].any()
