"""Which motion blobs really move: consistent motion over several frames, faster than registration noise.

A foreground blob of one frame is weak evidence: a residual misregistration of the drone's motion, the parallax of a
building or a tree, a flickering light or a shadow edge all leave blobs. A vehicle leaves a blob that keeps moving,
in one direction, frame after frame, at a speed that the residual of the ego-motion cannot explain. This gate follows
blobs across frames in ego-motion compensated coordinates and lets one through only when:

- it has been seen in ``min_frames`` of the recent frames,
- its net displacement over that stretch is at least ``min_lengths_per_s`` of its own length per second (a scale-free
  speed floor: about 10 km/h for a car) and ``noise_factor`` times the registration residual per frame, and
- its path is straight (net displacement / path length >= ``min_straightness``): jitter and flicker wander, and
- it is not parallax: a static point above the road (a roof, a tree top) seen from a translating drone drifts along
  the drone's own image motion, slower than it (a 20 m building under a drone at 100 m: 25 % of the ground's image
  motion). A blob whose compensated motion is (anti-)parallel to the ego-motion at its place and smaller than
  ``max_parallax_fraction`` of it is rejected; a vehicle driving the drone's way faster than that still counts.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np
from pydantic import Field

from vision.config_base import StageConfig


class MotionGateConfig(StageConfig):
    min_frames: int = Field(5, ge=3, description="a blob must be seen this many times before it counts as a mover")
    max_misses: int = Field(2, ge=0, description="frames a blob may vanish before its history is dropped")
    min_lengths_per_s: float = Field(0.6, ge=0, description="speed floor in blob lengths per second (~10 km/h car)")
    noise_factor: float = Field(1.0, ge=0, description="speed floor in multiples of the registration residual")
    min_straightness: float = Field(0.6, ge=0, le=1, description="net displacement / path length over the stretch")
    max_parallax_fraction: float = Field(
        0.5, ge=0, description="motion along the ego-motion and below this share of it is taken for parallax"
    )


@dataclass
class _Candidate:
    centres: list[np.ndarray]  # centre per observed frame, all in the current frame's coordinates
    lengths: list[float]
    ego: list[np.ndarray]  # image motion the drone caused at the candidate's place, per frame
    misses: int = 0
    hold: int = 0  # frames it stays confirmed after its last passed test (a mover's blob is noisy frame to frame)


def _warp_points(H: np.ndarray, pts: np.ndarray) -> np.ndarray:
    p = np.column_stack([pts, np.ones(len(pts))]) @ H.T
    return p[:, :2] / p[:, 2:3]


class MovingBlobGate:
    def __init__(self, config: MotionGateConfig | None = None):
        self.config = config or MotionGateConfig()
        self.reset()

    def reset(self) -> None:
        self._cands: list[_Candidate] = []

    def update(
        self, blobs_xyxy: np.ndarray, H_prev_to_cur: np.ndarray | None, residual_px: float, fps: float
    ) -> np.ndarray:
        """Feed this frame's blobs (full-resolution xyxy); returns which of them are confirmed movers."""
        cfg = self.config
        blobs = np.asarray(blobs_xyxy, np.float64).reshape(-1, 4)
        if H_prev_to_cur is None:  # no registration: histories cannot be compared across the jump
            self._cands = []
        elif self._cands:
            # every candidate's history through the homography in one pass (per candidate it cost ~2 ms a frame)
            moved_all = _warp_points(H_prev_to_cur, np.concatenate([c.centres for c in self._cands]))
            at = 0
            for c in self._cands:
                n = len(c.centres)
                moved = moved_all[at : at + n]
                at += n
                c.ego.append(moved[-1] - c.centres[-1])
                c.centres = list(moved)
                del c.ego[: -2 * cfg.min_frames]
        centres = np.column_stack([(blobs[:, 0] + blobs[:, 2]) / 2, (blobs[:, 1] + blobs[:, 3]) / 2])
        lengths = np.maximum(blobs[:, 2] - blobs[:, 0], blobs[:, 3] - blobs[:, 1])
        owner = self._associate(centres, lengths)
        for j, ci in enumerate(owner):
            if ci < 0:
                self._cands.append(_Candidate([centres[j]], [float(lengths[j])], []))
                owner[j] = len(self._cands) - 1
            else:
                c = self._cands[ci]
                c.centres.append(centres[j])
                c.lengths.append(float(lengths[j]))
                c.misses = 0
                del c.centres[: -2 * cfg.min_frames], c.lengths[: -2 * cfg.min_frames]
        seen = set(owner.tolist())
        for i, c in enumerate(self._cands):
            if i not in seen:
                c.misses += 1
        confirmed = np.zeros(len(owner), bool)
        for j, ci in enumerate(owner):
            c = self._cands[ci]
            if self._moves(c, residual_px, fps):
                c.hold = cfg.min_frames
            else:
                c.hold = max(0, c.hold - 1)
            confirmed[j] = c.hold > 0
        self._cands = [c for c in self._cands if c.misses <= cfg.max_misses]
        return confirmed

    def _associate(self, centres: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Greedy nearest match of blobs to the candidates' predicted positions; -1 for a new blob."""
        owner = np.full(len(centres), -1, int)
        if not self._cands or not len(centres):
            return owner
        predicted = []
        for c in self._cands:
            last = c.centres[-1]
            step = (c.centres[-1] - c.centres[-2]) if len(c.centres) >= 2 else np.zeros(2)
            predicted.append(last + step * (1 + c.misses))
        pred = np.array(predicted)
        d = np.linalg.norm(centres[:, None, :] - pred[None, :, :], axis=2)
        radius = np.maximum(4.0, 0.75 * lengths)[:, None]
        d = np.where(d <= radius, d, np.inf)
        taken = set()
        for flat in np.argsort(d, axis=None):
            j, i = divmod(int(flat), d.shape[1])
            if not np.isfinite(d[j, i]):
                break
            if owner[j] >= 0 or i in taken:
                continue
            owner[j] = i
            taken.add(i)
        return owner

    def _moves(self, c: _Candidate, residual_px: float, fps: float) -> bool:
        # Python floats, not small numpy arrays: this runs for every blob on every frame
        cfg = self.config
        n = cfg.min_frames
        if len(c.centres) < n:
            return False
        pts = [(float(p[0]), float(p[1])) for p in c.centres[-n:]]
        path = sum(math.hypot(b[0] - a[0], b[1] - a[1]) for a, b in zip(pts, pts[1:]))
        net_x, net_y = pts[-1][0] - pts[0][0], pts[-1][1] - pts[0][1]
        net = math.hypot(net_x, net_y)
        per_frame = net / (n - 1)
        length = statistics.median(c.lengths[-n:])
        floor = max(cfg.min_lengths_per_s * length / max(fps, 1e-6), cfg.noise_factor * residual_px)
        if per_frame < floor or net < cfg.min_straightness * path:
            return False
        # both halves of the stretch move the same way at a similar pace: jitter can fake one straight stretch,
        # rarely two in a row
        mid = (n - 1) // 2
        ax, ay = pts[mid][0] - pts[0][0], pts[mid][1] - pts[0][1]
        bx, by = pts[-1][0] - pts[mid][0], pts[-1][1] - pts[mid][1]
        na, nb = math.hypot(ax, ay), math.hypot(bx, by)
        if min(na / max(mid, 1), nb / max(n - 1 - mid, 1)) < 0.5 * floor or ax * bx + ay * by < 0.7 * na * nb:
            return False
        ego = c.ego[-(n - 1) :]
        ego_x, ego_y = sum(float(e[0]) for e in ego), sum(float(e[1]) for e in ego)
        ego_len = math.hypot(ego_x, ego_y)
        if ego_len > 0 and net < cfg.max_parallax_fraction * ego_len:
            along = abs(net_x * ego_x + net_y * ego_y) / (net * ego_len)
            if along > 0.9:  # within ~25 degrees of the drone's own image motion
                return False
        return True
