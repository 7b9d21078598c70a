"""Which tracks to report at the frame's edge (``tracker.min_visible_at_border``): a vehicle cut by the edge is
reported once, and while, at least a given share of it is in view.

A box cut by the frame's edge covers only the part of the vehicle in view: its centre and size are not the vehicle's,
so neither are the speed and class that follow from them. The whole vehicle's box is the track's own box when it was
last measured clear of the edge (a vehicle leaving the view), else the median box of the vehicles measured clear of
the edge in the same rows (one entering it, or standing cut by the edge; in wider bands of rows, up to the whole
frame, where its own hold fewer than three: the median of the track's last such estimates, kept while the frame
holds too few vehicles to give one: else a queue at the edge flickers on and off as its neighbours come and go),
else the box itself when it reaches out of the frame. The decision is
taken on the frames a box is measured (detector or motion blob) and holds through the frames the tracker predicts:
a predicted box lags behind a box that grows or shrinks at the edge. The tracks themselves live on.
"""

from __future__ import annotations

import numpy as np

EDGE_PX = 2.0  # a box this close to the frame's edge is cut by it
ROW_BANDS = (1 / 6, 1 / 3, 1.0)  # rows either side (share of the frame's height) whose vehicles give a size
ROW_ESTIMATES = 9  # a track's last estimates of its whole size from the vehicles in its rows, kept for their median


class FrameEdgeRule:
    def __init__(self, min_visible: float, width: int, height: int):
        self.min_visible = min_visible
        self.w, self.h = width, height
        # track id -> [cut when last measured, area when measured whole, reported, its rows' last size estimates]
        self._state: dict[int, list] = {}

    def keep(
        self, ids: list[int], xyxy: np.ndarray, measured: np.ndarray, reference: np.ndarray | None = None
    ) -> np.ndarray:
        """One frame's tracks (ids, boxes, measured this frame?) -> which of them to report. ``reference``: the
        boxes whose size may stand for a vehicle in the same rows (default all; the pipeline leaves out the tracks it
        withholds, motion blobs whose boxes are looser)."""
        w, h, share = self.w, self.h, self.min_visible
        boxes = np.asarray(xyxy, np.float64).reshape(-1, 4)
        out = np.zeros(len(boxes), bool)
        if not len(boxes):
            return out
        edge = (boxes[:, 0] <= EDGE_PX) | (boxes[:, 1] <= EDGE_PX) | (boxes[:, 2] >= w - EDGE_PX)
        edge |= boxes[:, 3] >= h - EDGE_PX
        area = (boxes[:, 2] - boxes[:, 0]).clip(0) * (boxes[:, 3] - boxes[:, 1]).clip(0)
        inside = (boxes[:, [0, 2]].clip(0, w) @ [-1, 1]).clip(0) * (boxes[:, [1, 3]].clip(0, h) @ [-1, 1]).clip(0)
        cy = (boxes[:, 1] + boxes[:, 3]) / 2
        clear = ~edge & measured
        if reference is not None:
            clear &= np.asarray(reference, bool)
        for i, tid in enumerate(ids):
            entry = self._state.setdefault(tid, [False, None, True, []])
            if not measured[i]:  # a prediction: the last measured frame's decision holds; a vehicle last seen whole
                # and now predicted mostly out of the frame has left it
                out[i] = entry[2] if entry[0] else inside[i] >= share * area[i]
                continue
            entry[0] = bool(edge[i])
            if not edge[i]:
                entry[1], entry[2] = float(area[i]), True
                out[i] = True
                continue
            ref = entry[1]
            if ref is None:
                rows = entry[3]
                # same rows: vehicle sizes change with rows (oblique); where they hold too few, wider bands of rows
                # (a queue at the top of a nadir view has no neighbours beside it)
                for band in ROW_BANDS:
                    near = clear & (np.abs(cy - cy[i]) <= band * h)
                    if near.sum() >= 3:
                        rows.append(float(np.median(area[near])))
                        del rows[:-ROW_ESTIMATES]
                        break
                ref = float(np.median(rows)) if rows else None
            entry[2] = bool(inside[i] >= area[i] if ref is None else inside[i] >= share * max(ref, float(area[i])))
            out[i] = entry[2]
        if len(self._state) > 4 * max(len(ids), 64):  # forget tracks long gone
            self._state = {k: v for k, v in self._state.items() if k in set(ids)}
        return out
