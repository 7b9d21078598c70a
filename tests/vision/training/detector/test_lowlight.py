"""Night training data: UAVDT frames with boxes (ignore regions blanked) and night-like copies of day images."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vision.training.detector.lowlight import LowLightDataError, low_light, low_light_copies, uavdt_frames


def _sequence(tmp_path, frames: int = 6):
    img = tmp_path / "seq" / "img"
    img.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for n in range(1, frames + 1):
        cv2.imwrite(str(img / f"img{n:06d}.jpg"), rng.integers(0, 255, (60, 100, 3), np.uint8))
    gt = tmp_path / "seq" / "X_gt_whole.txt"
    gt.write_text("".join(f"{n},1,{10 + n},20,12,8,1,0,1\n{n},2,60,5,20,10,1,0,2\n" for n in range(1, frames + 1)))
    (tmp_path / "seq" / "X_gt_ignore.txt").write_text(
        "".join(f"{n},-1,80,40,15,15,-1,-1,-1\n" for n in range(1, frames + 1))
    )
    return tmp_path / "seq", gt


def test_uavdt_frames_writes_the_range_with_yolo_labels_and_blank_ignore_regions(tmp_path):
    seq, gt = _sequence(tmp_path)
    out = tmp_path / "out"
    assert uavdt_frames(seq, gt, (3, 6), out, step=2) == 2  # frames 3 and 5
    names = sorted(p.stem for p in (out / "images").glob("*.jpg"))
    assert names == ["X_000003", "X_000005"]
    rows = [line.split() for line in (out / "labels" / "X_000003.txt").read_text().splitlines()]
    assert [r[0] for r in rows] == ["0", "1"]  # UAVDT car -> car, truck -> truck
    cx, cy, w, h = map(float, rows[0][1:])
    assert (cx, w, h) == pytest.approx(((13 + 6) / 100, 12 / 100, 8 / 60), abs=1e-5)
    patch = cv2.imread(str(out / "images" / "X_000003.jpg"))[42:53, 82:93].astype(float)
    assert patch.std() < 8  # the ignore region is one flat colour (JPEG noise aside), not random pixels


def test_uavdt_frames_with_a_range_past_the_end_is_an_error(tmp_path):
    seq, gt = _sequence(tmp_path, frames=3)
    with pytest.raises(LowLightDataError):
        uavdt_frames(seq, gt, (10, 20), tmp_path / "out")


def test_low_light_darkens_adds_lights_at_vehicles_and_keeps_the_size():
    day = np.full((120, 200, 3), 170, np.uint8)
    night = low_light(day, np.array([[50, 40, 80, 55]], float), np.random.default_rng(1))
    assert night.shape == day.shape and night.dtype == np.uint8
    assert night.mean() < 0.6 * day.mean()
    assert night.max() > 200  # lights bloom: not just a darker copy


def test_low_light_copies_keep_the_labels(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "lab").mkdir()
    cv2.imwrite(str(tmp_path / "img" / "a.jpg"), np.full((50, 80, 3), 150, np.uint8))
    (tmp_path / "lab" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    assert low_light_copies([tmp_path / "img" / "a.jpg"], tmp_path / "lab", tmp_path / "out") == 1
    assert (tmp_path / "out" / "labels" / "lowlight__a.txt").read_text() == "0 0.5 0.5 0.2 0.2\n"
    assert cv2.imread(str(tmp_path / "out" / "images" / "lowlight__a.jpg")).mean() < 110
