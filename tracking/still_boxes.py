"""Still vehicles' boxes for a recorded run: a vehicle standing still is reported at its window's median box.

A car waiting in a queue does not move, but the detector's box of it does: a few pixels each side from frame to frame,
and for a second or two now and then a box of it together with its neighbour. At the 25-35 px a queued car has in
an oblique view from 100 m that is enough to take the reported box's overlap with the car under 0.5 on some frames,
the usual threshold of a match, and the car counts as missed there and a false box beside it (a "fragment" of its
track, though its id never changed). A recorded run knows the track's boxes before and after every frame: where the
centres of its measured boxes over a second before and after the frame, in the run's first frame's pixels (the
drone's own motion removed, ``FrameResult.to_first``), stay within a small share of the vehicle's size of their
median, and the second before puts it where the second after does, the vehicle stands still there and its box is
the window's median box, carried back into the frame. A vehicle that moves, and one that sets off or comes to a stop
within the window, keep theirs; a car standing cut by the frame's edge is held as any other (its boxes are cut
alike), one entering or leaving the view is moving. A box of the car with its neighbour that lasts
longer than the frames around it is not outvoted and stays.

Measured (docs/study.md, "Still vehicles at their median box"): fragments a stopped vehicle 0.42 -> 0.29 on the
five-minute roundabout render, 0.18 -> 0.13 on its seed-2 scene; UAVDT's MOTA, IDF1, false and missed boxes
identical, HOTA +0.17 / -0.08 / +0.05 (M1303 / night M1003 / nadir M0703).
"""

from __future__ import annotations

import cv2
import numpy as np

from tracking.track_starts import _through
from tracking.types import FrameResult

MIN_MEASURED = 3  # measured boxes a window needs to say where the vehicle stands


def still_boxes(results: list[FrameResult], window_s: float, radius_frac: float) -> int:
    """Give every reported box of a vehicle standing still (its measured centres over ``window_s`` seconds before
    and after the frame within ``radius_frac`` of its box's shorter side of their median, in the first frame's
    pixels, the medians before and after as close) the window's median box (in place); returns how many boxes
    changed. ``window_s`` <= 0: none."""
    if window_s <= 0:
        return 0
    # every box's centre in the first frame's pixels, one homography per frame
    fixed_of: list[np.ndarray] = []
    for r in results:
        c: np.ndarray = np.array([0.5 * (tr.xyxy[:2] + tr.xyxy[2:]) for tr in r.tracks], np.float64).reshape(-1, 1, 2)
        if r.to_first is not None and len(c):
            c = cv2.perspectiveTransform(c, np.asarray(r.to_first, np.float64))
        fixed_of.append(c.reshape(-1, 2))
    to_frame: dict[int, np.ndarray] = {}  # result position -> the first frame's pixels -> its own
    by_id: dict[int, list[tuple[float, int, int]]] = {}  # track id -> (t, result position, position in its tracks)
    for k, r in enumerate(results):
        for j, tr in enumerate(r.tracks):
            by_id.setdefault(tr.track_id, []).append((r.frame.t, k, j))
    half = window_s
    changed = 0
    for rows in by_id.values():
        if len(rows) < MIN_MEASURED:
            continue
        t = np.array([row[0] for row in rows])
        boxes = np.array([results[k].tracks[j].xyxy for _, k, j in rows], np.float64)
        measured = np.array([results[k].tracks[j].measured for _, k, j in rows], bool)
        fixed = np.array([fixed_of[k][j] for _, k, j in rows])
        wh = boxes[:, 2:] - boxes[:, :2]
        lo = np.searchsorted(t, t - half, side="left")
        hi = np.searchsorted(t, t + half, side="right")
        for n, (_, k, j) in enumerate(rows):
            sel = np.arange(lo[n], hi[n])[measured[lo[n] : hi[n]]]
            if len(sel) < MIN_MEASURED:
                continue
            size = np.median(wh[sel], axis=0)
            centre = np.median(fixed[sel], axis=0)
            reach = radius_frac * size.min()
            if np.median(np.linalg.norm(fixed[sel] - centre, axis=1)) > reach:
                continue  # moving (or its boxes disagree): as reported
            before, after = sel[sel <= n], sel[sel >= n]
            if min(len(before), len(after)) < 2:
                continue
            if np.linalg.norm(np.median(fixed[before], axis=0) - np.median(fixed[after], axis=0)) > reach:
                continue  # sets off or comes to a stop in the window: where it stands is not known yet
            cx, cy = centre
            if results[k].to_first is not None:
                if k not in to_frame:
                    to_frame[k] = np.linalg.inv(np.asarray(results[k].to_first, np.float64))
                cx, cy = _through(to_frame[k], centre)
            w2, h2 = 0.5 * size
            new = np.array([cx - w2, cy - h2, cx + w2, cy + h2], np.float32)
            if np.abs(new - boxes[n]).max() < 1e-3:
                continue
            # a new array, not written into the old one: a box may be shared with a result the sinks already saw
            results[k].tracks[j].xyxy = new
            changed += 1
    return changed
