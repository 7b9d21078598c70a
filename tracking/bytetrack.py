"""ByteTrack (Ultralytics' implementation) with the drone's ego-motion compensated.

Ultralytics' tracker exposes a hook between Kalman prediction and the first association; we use it to move every
track's predicted state by the ego-motion homography, so a drifting or rotating drone does not break associations.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from ultralytics.trackers.byte_tracker import BYTETracker

from tracking.config import TrackerConfig
from vision.types import Detections


class _DetectionBatch:
    """The minimal Results-like view Ultralytics' tracker reads: conf, cls, xywh, xyxy, boolean indexing."""

    def __init__(self, xyxy: np.ndarray, conf: np.ndarray, cls: np.ndarray):
        self.xyxy = np.asarray(xyxy, np.float32).reshape(-1, 4)
        self.conf = np.asarray(conf, np.float32)
        self.cls = np.asarray(cls, np.float32)

    @property
    def xywh(self) -> np.ndarray:
        b = self.xyxy
        return np.column_stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]])

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, idx) -> "_DetectionBatch":
        return _DetectionBatch(self.xyxy[idx], self.conf[idx], self.cls[idx])


def warp_xyah_states(stracks: list, H: np.ndarray) -> None:
    """Move Kalman states laid out as (cx, cy, aspect, h, vx, vy, va, vh) through a homography.

    Ultralytics' own ``multi_gmc`` assumes an (x, y, w, h) layout; ByteTrack's is (x, y, aspect, h). The centre goes
    through the full homography, velocities through its local linear part, heights scale with the local zoom,
    and the aspect ratio is unchanged by a similarity.
    """
    if not stracks:
        return
    means = np.stack([st.mean for st in stracks]).astype(np.float64)  # (n, 8)
    covs = np.stack([st.covariance for st in stracks]).astype(np.float64)  # (n, 8, 8)
    p = np.column_stack([means[:, :2], np.ones(len(means))]) @ H.T  # (n, 3)
    w = p[:, 2]
    # Local Jacobian of the homography at each centre: (H2 * w - p_xy outer h3) / w^2
    J = (H[None, :2, :2] * w[:, None, None] - p[:, :2, None] * H[None, 2, None, :2]) / (w * w)[:, None, None]
    scale = np.sqrt(np.abs(np.linalg.det(J)))
    means[:, 0], means[:, 1] = p[:, 0] / w, p[:, 1] / w
    means[:, 3] *= scale
    means[:, 4:6] = np.einsum("nij,nj->ni", J, means[:, 4:6])
    means[:, 7] *= scale
    T = np.zeros((len(means), 8, 8))
    T[:, :2, :2] = J
    T[:, 4:6, 4:6] = J
    T[:, 2, 2] = T[:, 6, 6] = 1.0
    T[:, 3, 3] = T[:, 7, 7] = scale
    covs = T @ covs @ T.transpose(0, 2, 1)
    for st, m, c in zip(stracks, means, covs):
        st.mean, st.covariance = m, c


class EgoCompensatedByteTrack(BYTETracker):
    def __init__(self, config: TrackerConfig | None = None):
        cfg = config or TrackerConfig()
        super().__init__(SimpleNamespace(tracker_type="bytetrack", **cfg.model_dump()))
        self._H: np.ndarray | None = None

    def _pre_first_associate(self, strack_pool, unconfirmed, img, results_high) -> None:
        if self._H is not None:
            warp_xyah_states(strack_pool, self._H)
            warp_xyah_states(unconfirmed, self._H)

    def step(self, dets: Detections, H_prev_to_cur: np.ndarray | None = None) -> np.ndarray:
        """Associate this frame's detections; returns rows [x1, y1, x2, y2, track_id, score, cls, det_index]."""
        self._H = None if H_prev_to_cur is None or np.allclose(H_prev_to_cur, np.eye(3)) else H_prev_to_cur
        out = self.update(_DetectionBatch(dets.xyxy, dets.score, dets.class_id))
        return np.asarray(out, np.float32).reshape(-1, 8)
