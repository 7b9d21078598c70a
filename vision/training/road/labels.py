"""Hand-made road labels for drone frames (``drone_road_labels.json`` next to this module).

The frames themselves are third-party data and stay in ``../shared``; only the labels (our own work) ship.
Each entry names its source relative to the shared ``data`` folder: an image file, or a video plus a frame index.
A label is drawn in this order: ``road`` polygons filled, ``lines`` (poly-lines of a given pixel ``width``, for roads
that are easier to trace along their centre) drawn, then ``not_road`` polygons (medians, islands, parking lots cut out
of a road polygon) erased. ``ignore`` polygons mark areas the labeller could not judge (distant or ambiguous
ground); they count neither in the training loss nor in the IoU. ``crop`` ([x0, y0, x1, y1]) restricts an entry to
part of its frame, so one frame can give a training part and a disjoint validation part.
Coordinates are pixels of the source frame at its native size.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

DRONE_LABELS = Path(__file__).with_name("drone_road_labels.json")


class RoadLabelError(ValueError):
    """A label file or a labelled frame cannot be read."""


def load_labels(path: Path = DRONE_LABELS) -> list[dict]:
    try:
        data = json.loads(Path(path).read_text())
        return list(data["frames"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RoadLabelError(f"{path}: not a readable road-label file ({exc})") from exc


def load_label_image(entry: dict, data_root: str | Path) -> np.ndarray:
    """The BGR frame an entry labels, read from the shared data folder."""
    src = Path(data_root) / entry["source"]
    if entry.get("frame") is not None:
        # Decode from the start: seeking is inexact for some codecs and the clips are short.
        cap = cv2.VideoCapture(str(src))
        ok, image = False, None
        for _ in range(int(entry["frame"]) + 1):
            ok, image = cap.read()
            if not ok:
                break
        cap.release()
    else:
        image = cv2.imread(str(src), cv2.IMREAD_COLOR)
        ok = image is not None
    if not ok or image is None:
        raise RoadLabelError(f"{src}: cannot read frame {entry.get('frame')} for label {entry.get('id')}")
    return image


def _polys(entry: dict, key: str) -> list[np.ndarray]:
    return [np.round(np.asarray(p, np.float64)).astype(np.int32) for p in entry.get(key, [])]


def rasterise(entry: dict, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(road, ignore): uint8 masks (0/255) at ``shape`` (h, w), the source frame's size (before ``crop``)."""
    road = np.zeros(shape, np.uint8)
    # One fillPoly call per polygon: a single call with several polygons fills their overlaps even-odd (XOR).
    for poly in _polys(entry, "road"):
        cv2.fillPoly(road, [poly], 255)
    for line in entry.get("lines", []):
        pts = np.round(np.asarray(line["points"], np.float64)).astype(np.int32)
        cv2.polylines(road, [pts], False, 255, thickness=max(1, int(round(line["width"]))))
    for poly in _polys(entry, "not_road"):
        cv2.fillPoly(road, [poly], 0)
    ignore = np.zeros(shape, np.uint8)
    for poly in _polys(entry, "ignore"):
        cv2.fillPoly(ignore, [poly], 255)
    return road, ignore


def crop_box(entry: dict, shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """The entry's (x0, y0, x1, y1) within its frame: ``crop`` or the whole frame."""
    h, w = shape
    x0, y0, x1, y1 = entry.get("crop") or (0, 0, w, h)
    return max(0, int(x0)), max(0, int(y0)), min(w, int(x1)), min(h, int(y1))


def load_labelled(entry: dict, data_root: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image BGR, road 0/255, ignore 0/255) of an entry, cropped to its ``crop``."""
    image = load_label_image(entry, data_root)
    road, ignore = rasterise(entry, image.shape[:2])
    x0, y0, x1, y1 = crop_box(entry, image.shape[:2])
    return image[y0:y1, x0:x1], road[y0:y1, x0:x1], ignore[y0:y1, x0:x1]
