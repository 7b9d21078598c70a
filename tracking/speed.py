"""Ground-plane speed of every track, with an uncertainty, robust to outliers.

Track positions are stored in a stabilised pixel frame (the ego-motion chain removes the drone's motion). Each frame,
the last ``window_s`` seconds of a track are brought into the current frame, mapped to ground metres with that frame's
ground mapping, and a line is fitted to position over time (one robust reweighting pass). The slope is the velocity.
All tracks are fitted together in torch, in float64 on any device so all give the same numbers; the pipeline fits
on the CPU (on a GPU a fit this small is launch and copy overhead).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import torch

from tracking.config import SpeedConfig
from tracking.scale import GroundFrame
from tracking.types import ScaleSource


@dataclass
class SpeedResult:
    speed_kmh: float | None
    sigma_kmh: float | None
    flag: str | None
    ground_xy: tuple[float, float] | None
    lonlat: tuple[float, float] | None


class SpeedEstimator:
    def __init__(self, config: SpeedConfig, device: str = "cpu"):
        self.cfg = config
        self.device = torch.device(device)
        self._hist: dict[int, deque] = {}
        self._last_speed: dict[int, tuple[float, float]] = {}  # id -> (t, speed_kmh)
        self._H_cur_to_world = np.eye(3)

    def reset(self) -> None:
        self._hist.clear()
        self._last_speed.clear()
        self._H_cur_to_world = np.eye(3)

    def _advance(self, H_prev_to_cur: np.ndarray | None) -> None:
        if H_prev_to_cur is not None:
            self._H_cur_to_world = self._H_cur_to_world @ np.linalg.inv(H_prev_to_cur)
            self._H_cur_to_world /= self._H_cur_to_world[2, 2]
        # Re-anchor the stabilised frame on the current one now and then, so it never drifts into a degenerate warp.
        if np.linalg.cond(self._H_cur_to_world) > 50:
            A = np.linalg.inv(self._H_cur_to_world)
            for h in self._hist.values():
                for i, (t, x, y) in enumerate(h):
                    p = A @ np.array([x, y, 1.0])
                    h[i] = (t, p[0] / p[2], p[1] / p[2])
            self._H_cur_to_world = np.eye(3)

    def update(
        self,
        t: float,
        points: dict[int, tuple[float, float]],
        ground: GroundFrame | None,
        H_prev_to_cur: np.ndarray | None = None,
    ) -> dict[int, SpeedResult]:
        """``points``: track id -> reference point (pixels, current frame) of every track visible now."""
        self._advance(H_prev_to_cur)
        keep_s = self.cfg.window_s * 1.5 + 0.5
        for tid, (x, y) in points.items():
            p = self._H_cur_to_world @ np.array([x, y, 1.0])
            h = self._hist.setdefault(tid, deque())
            h.append((t, p[0] / p[2], p[1] / p[2]))
            while h and t - h[0][0] > keep_s:
                h.popleft()
        for tid in [k for k, h in self._hist.items() if t - h[-1][0] > keep_s]:
            del self._hist[tid]
            self._last_speed.pop(tid, None)
        if not points:
            return {}
        ids = list(points)
        results = {tid: SpeedResult(None, None, None, None, None) for tid in ids}
        if ground is None:
            return results
        cur = np.array([points[i] for i in ids], np.float64)
        g_now = ground.to_ground(cur)
        ll = ground.to_lonlat(g_now)
        for k, tid in enumerate(ids):
            results[tid].ground_xy = (float(g_now[k, 0]), float(g_now[k, 1]))
            if ll is not None:
                results[tid].lonlat = (float(ll[k, 0]), float(ll[k, 1]))
        valid = ground.valid(cur, self.cfg.max_metres_per_pixel)
        fit_ids = [
            i
            for k, i in enumerate(ids)
            if valid[k]
            and len(self._hist[i]) >= 3
            and self._hist[i][-1][0] - self._hist[i][0][0] >= self.cfg.min_track_s
        ]
        if not fit_ids:
            return results
        v, sig = self._fit(fit_ids, t, ground)
        for k, tid in enumerate(fit_ids):
            speed = float(v[k]) * 3.6
            # the scale's own error (by source; the size prior's from its fit, by image position) adds to the fit's
            rel = ground.rel_sigma_at(*points[tid])
            sigma = float(np.hypot(sig[k] * 3.6, rel * speed))
            flag = None
            if speed > self.cfg.max_plausible_kmh:
                flag = "implausible_speed"
            elif tid in self._last_speed:
                t0, s0 = self._last_speed[tid]
                if t > t0 and abs(speed - s0) / 3.6 / (t - t0) > self.cfg.max_accel_ms2 and abs(speed - s0) > 3 * sigma:
                    flag = "implausible_accel"
            if flag is None and ground.source == ScaleSource.SIZE_PRIOR:
                flag = "low_confidence_scale"
            if flag not in ("implausible_speed", "implausible_accel"):
                self._last_speed[tid] = (t, speed)
            r = results[tid]
            r.speed_kmh, r.sigma_kmh, r.flag = speed, sigma, flag
        return results

    def _fit(self, ids: list[int], t_now: float, ground: GroundFrame) -> tuple[np.ndarray, np.ndarray]:
        """Robust line fit of ground position vs time for each track; returns speed (m/s) and its 1-sigma."""
        win = self.cfg.window_s
        rows = [[p for p in self._hist[i] if t_now - p[0] <= win + 1e-6] for i in ids]
        L = max(len(r) for r in rows)
        arr = np.zeros((len(ids), L, 3))
        mask = np.zeros((len(ids), L), bool)
        for k, r in enumerate(rows):
            arr[k, : len(r)] = r
            mask[k, : len(r)] = True
        dev, dt = self.device, torch.float64
        T = torch.as_tensor(arr[..., 0], device=dev, dtype=dt)
        P = torch.as_tensor(arr[..., 1:], device=dev, dtype=dt)
        M = torch.as_tensor(mask, device=dev, dtype=dt)
        # stabilised frame -> current frame pixels -> ground metres, one combined homography
        H = torch.as_tensor(ground.H_img_to_ground @ np.linalg.inv(self._H_cur_to_world), device=dev, dtype=dt)
        ph = torch.cat([P, torch.ones_like(P[..., :1])], -1) @ H.T
        G = ph[..., :2] / ph[..., 2:3]
        w = M.clone()
        for _ in range(2):  # least squares, then once more without the outliers it exposed
            sw = w.sum(1).clamp_min(1e-9)
            tbar = (w * T).sum(1) / sw
            gbar = (w[..., None] * G).sum(1) / sw[:, None]
            dtm = (T - tbar[:, None]) * M
            stt = (w * dtm**2).sum(1).clamp_min(1e-9)
            vel = (w[..., None] * dtm[..., None] * (G - gbar[:, None])).sum(1) / stt[:, None]
            res = ((G - gbar[:, None] - dtm[..., None] * vel[:, None]) ** 2).sum(-1).sqrt() * M
            med = torch.where(M > 0, res, torch.nan).nanmedian(dim=1).values.nan_to_num(0.0)
            w = M * (res <= 3.0 * 1.4826 * med[:, None] + 0.05).to(dt)
        n = w.sum(1)
        var = (w * res**2).sum(1) / (n - 2).clamp_min(1)
        sigma = (var / stt).sqrt()
        return vel.norm(dim=1).cpu().numpy(), sigma.cpu().numpy()
