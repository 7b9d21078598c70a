"""Multi-scale training copies: half-scale collages and native-resolution tiles keep every box on its vehicle."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vision.training.detector.scales import half_scale_collages, native_tiles


def _image_with_box(folder, name, size, box_xyxy, cls=0):
    """A grey image with one white rectangle (the 'vehicle') and its YOLO label."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    (folder / "labels").mkdir(parents=True, exist_ok=True)
    w, h = size
    image = np.full((h, w, 3), 40, np.uint8)
    x1, y1, x2, y2 = box_xyxy
    image[y1:y2, x1:x2] = 255
    cv2.imwrite(str(folder / "images" / f"{name}.png"), image)
    (folder / "labels" / f"{name}.txt").write_text(
        f"{cls} {(x1 + x2) / 2 / w} {(y1 + y2) / 2 / h} {(x2 - x1) / w} {(y2 - y1) / h}\n"
    )
    return folder / "images" / f"{name}.png"


def _boxes_px(label_file, width, height):
    rows = np.loadtxt(label_file, ndmin=2)
    cx, cy, w, h = rows[:, 1] * width, rows[:, 2] * height, rows[:, 3] * width, rows[:, 4] * height
    return rows[:, 0], np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def _white_box(image):
    ys, xs = np.nonzero(image[:, :, 0] > 150)
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], float)


def test_half_scale_collage_puts_four_images_at_half_size_with_their_boxes(tmp_path):
    src = tmp_path / "src"
    boxes = [(100, 200, 200, 260), (300, 40, 380, 200), (0, 0, 90, 50), (500, 560, 640, 640)]
    paths = [_image_with_box(src, f"im{k}", (640, 640), b, cls=k) for k, b in enumerate(boxes)]
    assert half_scale_collages(paths, src / "labels", tmp_path / "out") == 1
    collage = cv2.imread(str(tmp_path / "out" / "images" / "half__im0.jpg"))
    assert collage.shape == (640, 640, 3)
    classes, got = _boxes_px(tmp_path / "out" / "labels" / "half__im0.txt", 640, 640)
    assert list(classes) == [0, 1, 2, 3]
    for k, (x1, y1, x2, y2) in enumerate(boxes):
        ox, oy = (k % 2) * 320, (k // 2) * 320
        assert got[k] == pytest.approx([ox + x1 / 2, oy + y1 / 2, ox + x2 / 2, oy + y2 / 2], abs=0.5)
    # the label is where the pixels are: the first cell's white box
    assert _white_box(collage[:320, :320]) == pytest.approx(got[0], abs=2)


def test_a_short_last_group_leaves_grey_cells_and_tiny_boxes_are_dropped(tmp_path):
    src = tmp_path / "src"
    paths = [_image_with_box(src, "a", (640, 640), (10, 10, 13, 60))]  # 3 px wide -> 1.5 px at half size
    assert half_scale_collages(paths, src / "labels", tmp_path / "out") == 1
    assert (tmp_path / "out" / "labels" / "half__a.txt").read_text() == ""
    collage = cv2.imread(str(tmp_path / "out" / "images" / "half__a.jpg"))
    assert abs(float(collage[400:, 400:].mean()) - 114) < 3


def test_native_tiles_keep_the_pixel_size_and_place_of_each_vehicle(tmp_path):
    src = tmp_path / "src"
    box = (900, 300, 980, 340)  # right side of a 1024x540 frame (UAVDT size)
    path = _image_with_box(src, "frame", (1024, 540), box)
    assert native_tiles([path], src / "labels", tmp_path / "out") == 2  # x origins 0 and 384
    right = tmp_path / "out" / "images" / "native__frame__x384_y0.jpg"
    tile = cv2.imread(str(right))
    assert tile.shape == (540, 640, 3)
    _, got = _boxes_px(tmp_path / "out" / "labels" / "native__frame__x384_y0.txt", 640, 540)
    assert got[0] == pytest.approx([900 - 384, 300, 980 - 384, 340], abs=0.5)
    assert _white_box(tile) == pytest.approx(got[0], abs=2)
    assert (tmp_path / "out" / "labels" / "native__frame__x0_y0.txt").read_text() == ""  # not in the left tile
