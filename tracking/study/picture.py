"""``study.png``: the study at a glance, for the reader who would rather look than read tables.

The junction as the flight saw it, north up: every vehicle's smoothed path on the ground, coloured by the approach it
came from (grey where it has none: it entered in mid-view, or stood), each approach an arrow into the junction in its
colour with its name and its vehicles in and out, a scale bar, and beside it the origin-destination matrix. A wrong
approach, paths that stop in the middle, a movement nobody drives: the picture shows them at once. Plain OpenCV on
the ground plane (no map tiles): the dashboard's study page and report draw it on the map.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from tracking.study.model import Study

# Distinct colours (BGR), one per approach in order; a junction has rarely more than six arms
APPROACH_BGR = [(180, 119, 31), (14, 127, 255), (44, 160, 44), (40, 39, 214), (189, 103, 148), (75, 86, 140)]
NO_ORIGIN_BGR = (190, 190, 190)
BACKGROUND = (250, 250, 250)
INK = (40, 40, 40)
FONT = cv2.FONT_HERSHEY_SIMPLEX
MARGIN = 0.06  # of the map's side, around what is drawn


def approach_colour(index: int) -> tuple[int, int, int]:
    return APPROACH_BGR[index % len(APPROACH_BGR)]


def _nice_length(metres: float) -> float:
    """The longest of 1, 2, 5 x 10^k not above ``metres``."""
    k = 10.0 ** np.floor(np.log10(max(metres, 1e-3)))
    return float(max(f * k for f in (1.0, 2.0, 5.0) if f * k <= metres))


def ground_to_picture(study: Study, map_px: int = 1000) -> tuple[Callable[[np.ndarray], np.ndarray], float]:
    """The map's ground metres -> picture pixels (north up, the same scale on both axes): every path and every
    approach's arrow, with a margin."""
    paths = [s.xy for s in study.smoothed.values() if len(s.xy) >= 2]
    ends = [np.array([[a.x, a.y], [a.x, a.y] - a.inbound * a.radius_m]) for a in study.approaches]
    pts = np.vstack(paths + ends) if paths or ends else np.zeros((1, 2))
    lo, hi = pts.min(0), pts.max(0)
    scale = (1 - 2 * MARGIN) * map_px / max(float((hi - lo).max()), 1.0)  # pixels per metre
    centre = 0.5 * (lo + hi)

    def px(xy: np.ndarray) -> np.ndarray:
        xy = np.asarray(xy, np.float64).reshape(-1, 2)
        return (
            np.column_stack([map_px / 2 + (xy[:, 0] - centre[0]) * scale, map_px / 2 - (xy[:, 1] - centre[1]) * scale])
            .round()
            .astype(np.int32)
        )

    return px, scale


def study_picture(study: Study, map_px: int = 1000, panel_px: int = 420) -> np.ndarray:
    """The picture (BGR): the ground map, ``map_px`` square, and a panel ``panel_px`` wide with the O-D matrix."""
    img = np.full((map_px, map_px + panel_px, 3), BACKGROUND, np.uint8)
    px, scale = ground_to_picture(study, map_px)
    margin = MARGIN * map_px
    colour = {a.id: approach_colour(k) for k, a in enumerate(study.approaches)}
    origin = {v.track_id: v.origin for v in study.vehicles}
    # vehicles without an origin first, so the counted ones are drawn over them
    for tid, s in sorted(study.smoothed.items(), key=lambda kv: origin.get(kv[0]) is not None):
        if len(s.xy) >= 2:
            bgr = colour.get(origin.get(tid) or "", NO_ORIGIN_BGR)
            cv2.polylines(img, [px(s.xy)], False, bgr, 1, cv2.LINE_AA)
    inbound = {a.id: 0 for a in study.approaches}
    outbound = dict(inbound)
    for v in study.vehicles:
        if v.origin in inbound:
            inbound[v.origin] += 1
        if v.destination in outbound:
            outbound[v.destination] += 1
    for a in study.approaches:
        head = np.array([a.x, a.y])
        tail = head - a.inbound * max(a.radius_m, 48.0 / scale)  # at least 48 px long
        p, q = px(tail)[0], px(head)[0]
        cv2.arrowedLine(img, tuple(int(v) for v in p), tuple(int(v) for v in q), colour[a.id], 5, cv2.LINE_AA, 0, 0.3)
        label = f"{a.name} in {inbound[a.id]} out {outbound[a.id]}"
        (tw, th), _ = cv2.getTextSize(label, FONT, 0.6, 2)
        x = int(np.clip(p[0] - tw / 2, 4, map_px - tw - 4))
        y = int(np.clip(p[1] + (th + 8 if p[1] > map_px / 2 else -10), th + 4, map_px - 6))
        cv2.putText(img, label, (x, y), FONT, 0.6, BACKGROUND, 5, cv2.LINE_AA)  # a halo over the paths
        cv2.putText(img, label, (x, y), FONT, 0.6, colour[a.id], 2, cv2.LINE_AA)
    bar_m = _nice_length(0.25 * (map_px - 2 * margin) / scale)
    x0, y0 = int(margin), int(map_px - margin / 2)
    cv2.line(img, (x0, y0), (x0 + int(round(bar_m * scale)), y0), INK, 3)
    cv2.putText(img, f"{bar_m:g} m", (x0, y0 - 8), FONT, 0.5, INK, 1, cv2.LINE_AA)
    cv2.putText(img, "N", (map_px - 30, 30), FONT, 0.7, INK, 2, cv2.LINE_AA)
    cv2.arrowedLine(img, (map_px - 23, 70), (map_px - 23, 40), INK, 2, cv2.LINE_AA, 0, 0.4)
    _panel(img, study, map_px, colour)
    return img


def _panel(img: np.ndarray, study: Study, x0: int, colour: dict[str, tuple[int, int, int]]) -> None:
    """The O-D matrix and the counts beside the map."""
    cv2.line(img, (x0, 0), (x0, img.shape[0]), (210, 210, 210), 1)
    counted = [v for v in study.vehicles if v.origin is not None and v.destination is not None]
    lines = [
        ("Traffic study", 0.8, 2),
        (f"{study.t1 - study.t0:.0f} s of flight, {len(study.vehicles)} vehicles", 0.5, 1),
        (f"{len(counted)} with origin and destination", 0.5, 1),
    ]
    y = 40
    for text, size, weight in lines:
        cv2.putText(img, text, (x0 + 16, y), FONT, size, INK, weight, cv2.LINE_AA)
        y += int(42 * size + 8)
    ids = [a.id for a in study.approaches]
    names = [a.name for a in study.approaches]
    label = dict(zip(ids, names if len(set(names)) == len(names) else ids))  # as the map names them, where unique
    od = Counter((str(v.origin), str(v.destination)) for v in counted)
    cell = max(34, min(56, (img.shape[1] - x0 - 90) // max(len(ids) + 1, 1)))
    y += 20
    cv2.putText(img, "from \\ to", (x0 + 16, y), FONT, 0.45, INK, 1, cv2.LINE_AA)
    for k, a in enumerate(ids):  # destination headers, then one row per origin
        cv2.putText(img, label[a], (x0 + 100 + k * cell, y), FONT, 0.6, colour[a], 2, cv2.LINE_AA)
    for r, o in enumerate(ids):
        yy = y + (r + 1) * 30
        cv2.putText(img, label[o], (x0 + 40, yy), FONT, 0.6, colour[o], 2, cv2.LINE_AA)
        for k, d in enumerate(ids):
            n = od[(o, d)]
            cv2.putText(
                img, str(n), (x0 + 100 + k * cell, yy), FONT, 0.55, INK if n else (170, 170, 170), 1, cv2.LINE_AA
            )
    y += (len(ids) + 2) * 30
    key = [(approach_colour(0), "path: coloured by origin"), (NO_ORIGIN_BGR, "no origin (mid-view, standing)")]
    for bgr, text in key:
        cv2.line(img, (x0 + 16, y - 5), (x0 + 46, y - 5), bgr, 3)
        cv2.putText(img, text, (x0 + 56, y), FONT, 0.45, INK, 1, cv2.LINE_AA)
        y += 24


def write_study_picture(study: Study, path: Path) -> Path:
    """``study.png`` at ``path``."""
    if not cv2.imwrite(str(path), study_picture(study)):
        raise OSError(f"{path}: the picture could not be written")
    return Path(path)
