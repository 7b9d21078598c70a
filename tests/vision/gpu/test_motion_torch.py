"""The torch motion layer against the OpenCV one: foreground masks (IoU) and moving blobs (count, box IoU) on
synthetic and real frames, given the same grey frames and homographies; streams batched against one by one."""

import cv2
import numpy as np
import pytest
import torch

from tests.vision.gpu.conftest import DEVICES, nadir_frames
from tests.vision.test_motion import _frames
from vision.config import MotionConfig
from vision.ego_motion import EgoMotionEstimator
from vision.gpu.motion import TorchMotionDetector, connected_components, update_streams
from vision.motion import MotionDetector

# Stated tolerances between the backends on real footage (same grey frames and homographies; they differ in OpenCV's
# fixed-point warp interpolation): foreground mask IoU and blob-count difference.
MASK_IOU_MIN, BLOB_COUNT_TOLERANCE = 0.9, 0.15


def _iou(a, b):
    a, b = a > 0, b > 0
    return (a & b).sum() / max((a | b).sum(), 1)


def _box_iou(a, b):
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


def _grey(g, device):
    return torch.as_tensor(g, device=device)[None, None].float()


@pytest.mark.parametrize("device", DEVICES)
def test_moving_car_found_parked_car_and_panning_ground_ignored(device):
    frames, Hs, boxes = _frames()
    md, ref = TorchMotionDetector(device=device), MotionDetector()
    for k, g in enumerate(frames):
        field = md.update(_grey(g, device), Hs[k] if k else None, 1.0)
        ref_field = ref.update(g, Hs[k] if k else None, 1.0)
    moving_box, parked_box = boxes[-1]
    frac = field.moving_fraction(np.array([moving_box, parked_box], np.float32))
    assert frac[0] > 0.3 and frac[1] < 0.05
    assert np.allclose(frac, ref_field.moving_fraction(np.array([moving_box, parked_box], np.float32)), atol=0.05)
    blobs = md.blobs(field, min_area_px=20)
    cx = (blobs[:, 0] + blobs[:, 2]) / 2
    assert np.any(np.abs(cx - (moving_box[0] + moving_box[2]) / 2) < 12)
    assert field.mask[150:, :].mean() < 2
    assert _iou(field.mask, ref_field.mask) > 0.95
    ref_blobs = ref.blobs(ref_field, min_area_px=20)
    assert len(blobs) == len(ref_blobs) and _box_iou(blobs, ref_blobs).max(1).min() > 0.8


def test_road_mask_limits_motion():
    frames, Hs, _ = _frames()
    md = TorchMotionDetector()
    road = np.zeros_like(frames[0])
    for k, g in enumerate(frames):
        field = md.update(_grey(g, "cpu"), Hs[k] if k else None, 1.0, road)
    assert not field.mask.any() and field.unrestricted.any()


def test_agrees_with_opencv_on_real_footage():
    """12 frames of the 1080p nadir clip: both backends fed OpenCV's grey frames and homographies."""
    frames = nadir_frames(list(range(12)))
    ego, ref, md = EgoMotionEstimator(), MotionDetector(), TorchMotionDetector()
    ious, counts, matched = [], [], []
    for k, img in enumerate(frames):
        g = ego.prepare(img)
        e = ego.update(g)
        s = ego.scale
        H = np.diag([s, s, 1.0]) @ e.H @ np.diag([1 / s, 1 / s, 1.0]) if k else None
        a, b = ref.update(g, H, s), md.update(_grey(g, "cpu"), H, s)
        if k < 2:
            continue
        ious.append(_iou(a.mask, b.mask))
        ba, bb = ref.blobs(a), md.blobs(b)
        counts.append((len(ba), len(bb)))
        if len(ba) and len(bb):
            matched.append(np.median(_box_iou(ba, bb).max(1)))
    assert min(ious) > MASK_IOU_MIN, ious
    assert all(abs(x - y) <= BLOB_COUNT_TOLERANCE * max(x, y) for x, y in counts), counts
    assert sum(x for x, _ in counts) > 100  # the clip has moving traffic: the comparison is not of empty sets
    assert min(matched) > 0.9, matched


def test_connected_components_match_opencv():
    rng = np.random.default_rng(3)
    mask = cv2.dilate((rng.random((120, 160)) > 0.93).astype(np.uint8), np.ones((3, 3), np.uint8))
    mask[40:100, 70] = 1  # a long thin blob: needs many propagation steps
    n, cv_labels = cv2.connectedComponents(mask, connectivity=8)
    labels = connected_components(torch.as_tensor(mask > 0)[None])[0].numpy()
    assert len(np.unique(labels[labels > 0])) == n - 1
    # same partition: each OpenCV component maps to exactly one torch label and back
    pairs = set(zip(cv_labels[mask > 0].tolist(), labels[mask > 0].tolist()))
    assert len(pairs) == n - 1


def test_streams_batched_equal_one_by_one():
    frames, Hs, _ = _frames(n=5)
    shifted = [np.roll(g, 7, axis=0) for g in frames]  # a second stream with other content
    cfg = MotionConfig()
    together = [TorchMotionDetector(cfg), TorchMotionDetector(cfg)]
    alone = [TorchMotionDetector(cfg), TorchMotionDetector(cfg)]
    for k in range(len(frames)):
        H = Hs[k] if k else None
        both = update_streams(together, [_grey(frames[k], "cpu"), _grey(shifted[k], "cpu")], [H, H], [1.0, 1.0])
        solo = [alone[0].update(_grey(frames[k], "cpu"), H, 1.0), alone[1].update(_grey(shifted[k], "cpu"), H, 1.0)]
        for x, y in zip(both, solo):
            assert np.array_equal(x.mask, y.mask) and np.array_equal(x.changed, y.changed)
    assert np.array_equal(together[0].blobs(both[0]), alone[0].blobs(solo[0]))
    assert len(together[0].blobs(both[0]))


@pytest.mark.parametrize("device", DEVICES)
def test_a_still_scene_has_no_blobs_and_a_mover_has_one(device):
    """No moving pixel: no blobs (an empty foreground takes the same path as a full one, no early exit); one bright
    square moving: its blob, in the same place as OpenCV's."""
    det, ref = TorchMotionDetector(MotionConfig(), device), MotionDetector(MotionConfig())
    rng = np.random.default_rng(1)
    still = (rng.random((120, 160)) * 40 + 60).astype(np.uint8)
    for _ in range(3):
        field = det.update(_grey(still, device), np.eye(3), 1.0)
        assert det.blobs(field).shape == (0, 4)
    for k in range(6):
        grey = still.copy()
        grey[50:62, 20 + 6 * k : 32 + 6 * k] = 250
        field = det.update(_grey(grey, device), np.eye(3), 1.0)
        ref_field = ref.update(grey, np.eye(3), 1.0)
    blobs, ref_blobs = det.blobs(field), ref.blobs(ref_field)
    assert len(blobs) == len(ref_blobs) >= 1
    assert np.allclose(blobs, ref_blobs, atol=1)
