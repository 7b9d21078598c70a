"""Which tracks of a run are vehicles a reference run also tracked: "vehicles found" without ground truth.

Counting tracks that last >= 1 s rewards any layer that invents tracks. Here a candidate track counts as a found
vehicle only when it follows a reference track (the native-resolution run on the 1080p interchange): in at least
``share`` of their common frames the two boxes overlap (IoU >= ``min_iou``) or their centres lie within one vehicle
length (the reference box's long side), for at least ``min_close_s`` seconds.

Reported: reference vehicles (tracks >= ``min_s``) found by at least one candidate track; candidate tracks
(>= ``min_s``) that follow no reference track at all (extra: invented, or vehicles the reference missed, which no
ground truth here can tell apart); and the old count of candidate tracks >= ``min_s``.

Used by ``python -m bench.real`` and ``python -m bench.real.cost --interchange`` on the 1080p nadir interchange.
"""

from __future__ import annotations

import numpy as np


def tracks_by_id(rows: np.ndarray) -> dict[int, dict[int, np.ndarray]]:
    """Rows (frame, id, x1, y1, x2, y2) -> id -> frame -> xyxy."""
    out: dict[int, dict[int, np.ndarray]] = {}
    for f, tid, *box in np.asarray(rows, np.float64).reshape(-1, 6):
        out.setdefault(int(tid), {})[int(f)] = np.array(box)
    return out


def _lasting(tracks: dict[int, dict[int, np.ndarray]], frames: float) -> set[int]:
    return {tid for tid, t in tracks.items() if max(t) - min(t) + 1 >= frames}


def vehicles_found(rows: np.ndarray, fps: float, min_s: float = 1.0) -> int:
    """Tracks lasting at least ``min_s`` seconds (first to last frame) in rows (frame, id, x1, y1, x2, y2): the
    count of "vehicles found" before the matched measure of :func:`match`."""
    return len(_lasting(tracks_by_id(rows), min_s * fps))


def _area(p: np.ndarray) -> np.ndarray:
    return (p[:, 2] - p[:, 0]) * (p[:, 3] - p[:, 1])


def follows(a: dict[int, np.ndarray], b: dict[int, np.ndarray], min_close: int, share: float, min_iou: float) -> bool:
    """Track ``a`` follows reference track ``b`` (frame -> xyxy each)."""
    common = sorted(a.keys() & b.keys())
    if len(common) < min_close:
        return False
    pa, pb = np.array([a[f] for f in common]), np.array([b[f] for f in common])
    ix = np.clip(np.minimum(pa[:, 2], pb[:, 2]) - np.maximum(pa[:, 0], pb[:, 0]), 0, None)
    iy = np.clip(np.minimum(pa[:, 3], pb[:, 3]) - np.maximum(pa[:, 1], pb[:, 1]), 0, None)
    inter = ix * iy
    iou = inter / np.maximum(_area(pa) + _area(pb) - inter, 1e-9)
    length = np.maximum(pb[:, 2] - pb[:, 0], pb[:, 3] - pb[:, 1])
    close = (iou >= min_iou) | (
        np.linalg.norm((pa[:, :2] + pa[:, 2:]) / 2 - (pb[:, :2] + pb[:, 2:]) / 2, axis=1) <= length
    )
    return int(close.sum()) >= min_close and close.mean() >= share


def match(
    candidate: np.ndarray,
    reference: np.ndarray,
    fps: float,
    min_s: float = 1.0,
    share: float = 0.5,
    min_close_s: float = 0.5,
    min_iou: float = 0.3,
    processed_fps: float | None = None,
) -> dict:
    """Rows (frame, id, x1, y1, x2, y2) of a candidate run and of the reference run on the same frames.

    ``fps``: the rate frame numbers count at (a track lasts ``min_s`` seconds when its frame numbers span that);
    ``processed_fps``: how many of those frames per second the runs have (a live run that kept every k-th frame has
    ``fps / k``; default ``fps``), for how many common frames make ``min_close_s``."""
    cand, ref = tracks_by_id(candidate), tracks_by_id(reference)
    cand_long, ref_long = _lasting(cand, min_s * fps), _lasting(ref, min_s * fps)
    min_close = max(2, round(min_close_s * (processed_fps or fps)))
    found: set[int] = set()
    extra = 0
    for cid in cand_long:
        # any reference track, however short, makes a candidate track not invented; only lasting ones count as found
        hits = {rid for rid in ref if follows(cand[cid], ref[rid], min_close, share, min_iou)}
        found |= hits & ref_long
        extra += not hits
    return {
        "tracks": len(cand_long),
        "reference_vehicles": len(ref_long),
        "found_matched": len(found),
        "extra": extra,
    }
