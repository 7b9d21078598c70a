"""Large vehicles (a rendered street from 40 m, cars ~100 px at 1280x720) with the shipped detector and the scale plan:
the frame is detected downscaled, and each car is one track, not its roof and bonnet as well."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edge.runner import process_video
from tests.conftest import shared_path
from tracking.config import PipelineConfig
from vision.synth import SceneConfig, generate_scene


@pytest.mark.slow  # ~18 s of CPU: rendering and running 30 frames of 1280x720
def test_rendered_large_cars_are_detected_downscaled_and_each_is_one_track(tmp_path):
    shared_path("data", "detection")  # real car crops make cars the detector knows; procedural ones it barely finds
    clip = tmp_path / "street"
    cfg = SceneConfig(
        scene="intersection",
        seed=3105,  # the accuracy suite's intersection: moving traffic under the 40 m view
        duration_s=1.2,
        fps=25.0,
        width=1280,
        height=720,
        altitude_m=40.0,
        gimbal_pitch_deg=-90.0,
        jitter_deg=0.0,
        drift_mps=0.0,
        yaw_rate_dps=0.0,
        altitude_wobble_m=0.0,
        use_shared_data="on",
        road_mask_every=0,
    )
    generate_scene(cfg, clip, progress=False)
    run = tmp_path / "run"
    process_video(clip / "video.mp4", run, PipelineConfig(), write_video=False, progress=False)
    scales = json.loads((run / "summary.json").read_text())["detector_scales"]
    assert scales and all(e["scale"] < 1.0 for e in scales[1:])  # the cars measured large: downscaled

    gt = np.loadtxt(clip / "gt" / "gt.txt", delimiter=",", ndmin=2)  # frame, id, x, y, w, h, ...
    out = np.loadtxt(run / "tracks_mot.txt", delimiter=",", ndmin=2)
    gt = gt[gt[:, 4] * gt[:, 5] >= 40 * 40]  # the large vehicles this test is about
    assert len(np.unique(gt[:, 1])) >= 3
    doubled, matched_ids = 0, dict[int, set[int]]()
    for f in np.unique(gt[:, 0]):
        g, o = gt[gt[:, 0] == f, 2:6], out[out[:, 0] == f]
        if not len(o):
            continue
        ox1, oy1, ow, oh = o[:, 2], o[:, 3], o[:, 4], o[:, 5]
        for gid, (x, y, w, h) in zip(gt[gt[:, 0] == f, 1], g):
            ix = (np.minimum(ox1 + ow, x + w) - np.maximum(ox1, x)).clip(0)
            iy = (np.minimum(oy1 + oh, y + h) - np.maximum(oy1, y)).clip(0)
            inside = ix * iy / (ow * oh)  # share of each track box inside this car
            iou = ix * iy / (ow * oh + w * h - ix * iy)
            doubled += int(((inside > 0.8) | (iou >= 0.5)).sum() >= 2)  # the car and its roof or bonnet, say
            matched_ids.setdefault(int(gid), set()).update(o[iou >= 0.5, 1].astype(int).tolist())
    cars = [ids for ids in matched_ids.values() if ids]
    assert len(cars) >= 3
    assert doubled <= 0.02 * len(gt)  # a car is not tracked twice in a frame (whole, and a part of it beside)
    assert sum(len(ids) == 1 for ids in cars) >= 0.9 * len(cars)  # one track per car over the clip
