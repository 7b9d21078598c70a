"""Turned training copies: the whole image is kept and each box still bounds its vehicle."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.vision.training.detector.test_scales import _boxes_px, _white_box
from vision.training.detector.turns import turned_copies


def _image_with_rounded_vehicle(folder, name, size, box_xyxy, cls=0):
    """A grey image with one white rounded rectangle filling ``box_xyxy`` (corner radius a quarter of its short
    side: a car's roof seen from above) and its YOLO label."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    (folder / "labels").mkdir(parents=True, exist_ok=True)
    w, h = size
    image = np.full((h, w, 3), 40, np.uint8)
    x1, y1, x2, y2 = box_xyxy
    r = min(x2 - x1, y2 - y1) // 4
    cv2.rectangle(image, (x1 + r, y1), (x2 - 1 - r, y2 - 1), (255, 255, 255), -1)
    cv2.rectangle(image, (x1, y1 + r), (x2 - 1, y2 - 1 - r), (255, 255, 255), -1)
    for cx, cy in ((x1 + r, y1 + r), (x2 - 1 - r, y1 + r), (x1 + r, y2 - 1 - r), (x2 - 1 - r, y2 - 1 - r)):
        cv2.circle(image, (cx, cy), r, (255, 255, 255), -1)
    cv2.imwrite(str(folder / "images" / f"{name}.png"), image)
    (folder / "labels" / f"{name}.txt").write_text(
        f"{cls} {(x1 + x2) / 2 / w} {(y1 + y2) / 2 / h} {(x2 - x1) / w} {(y2 - y1) / h}\n"
    )
    return folder / "images" / f"{name}.png"


@pytest.mark.parametrize("degrees", [90.0, 30.0, 45.0, 200.0])
def test_a_turned_copy_keeps_the_box_on_its_vehicle(tmp_path, degrees):
    image = _image_with_rounded_vehicle(tmp_path / "src", "street", (320, 200), (40, 60, 160, 108), cls=2)
    (copy,) = turned_copies([image], tmp_path / "src" / "labels", tmp_path / "out", degrees=degrees)
    turned = cv2.imread(str(copy))
    h, w = turned.shape[:2]
    c, s = abs(np.cos(np.radians(degrees))), abs(np.sin(np.radians(degrees)))
    assert abs(w - (320 * c + 200 * s)) <= 1.5 and abs(h - (320 * s + 200 * c)) <= 1.5  # none of the image cut off
    classes, boxes = _boxes_px(tmp_path / "out" / "labels" / f"{copy.stem}.txt", w, h)
    assert classes.tolist() == [2]
    # the vehicle's pixels after the turn: the label bounds them tightly (interpolation blurs the edge by a pixel),
    # where the turned box corners would overshoot at 30-45 degrees
    np.testing.assert_allclose(boxes[0], _white_box(turned), atol=2.0)


def test_random_angles_differ_per_image_and_repeat_with_the_seed(tmp_path):
    images = [_image_with_rounded_vehicle(tmp_path / "src", f"i{k}", (160, 160), (40, 40, 100, 70)) for k in range(4)]
    first = turned_copies(images, tmp_path / "src" / "labels", tmp_path / "a", seed=7)
    again = turned_copies(images, tmp_path / "src" / "labels", tmp_path / "b", seed=7)
    assert [p.name for p in first] == [p.name for p in again]
    assert len({p.name.split("__")[0] for p in first}) == 4  # four different angles
