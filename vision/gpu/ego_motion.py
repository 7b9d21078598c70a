"""Ego-motion registration in torch: the same model as ``vision.ego_motion`` (corners on the background, pyramidal
Lucas-Kanade, RANSAC homography on the downscaled frame), on any torch device and batched over frame pairs.

``TorchEgoMotionEstimator`` is a drop-in for ``EgoMotionEstimator`` (``prepare`` / ``update`` / ``scale`` /
``ground_velocities``); its ``prepare`` returns a (1, 1, h, w) tensor on the device, which the motion layer of the
same backend takes as it is. ``register`` estimates many pairs in one call (the frames of a video, or the current
frames of several streams); ``update_streams`` steps several per-stream estimators at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from vision.config import EgoMotionConfig
from vision.ego_motion import EgoMotion
from vision.gpu.flow import lucas_kanade, pyramid, select_corners
from vision.gpu.ransac import ransac_homography

PYRAMID_LEVELS = 3  # OpenCV path: maxLevel=3
REGISTER_WINDOW, VELOCITY_WINDOW = 21, 15  # LK windows of the OpenCV path (registration, new tracks' velocities)
EXCLUDE_PAD = 4  # px (downscaled) around each vehicle box kept free of corners, as the OpenCV path


def to_grey_tensor(
    images: np.ndarray | torch.Tensor, device: torch.device | str, downscale_to: int
) -> tuple[torch.Tensor, float]:
    """BGR uint8 frames (H, W, 3), (B, H, W, 3) or grey (H, W) -> grey (B, 1, h, w) float32 in [0, 255] on the
    device, long side downscaled to ``downscale_to`` (area averaging, as cv2.INTER_AREA). Returns it and the scale."""
    t = torch.as_tensor(images).to(device, non_blocking=True)
    if t.ndim == 2:
        t = t[None, ..., None]
    elif t.ndim == 3 and t.shape[-1] in (1, 3) and t.shape[-1] != t.shape[-2]:
        t = t[None]
    if t.ndim == 3:  # a stack of grey frames
        t = t[..., None]
    t = t.permute(0, 3, 1, 2).float()
    # rounded after each step as OpenCV's uint8 images are: the motion layer's thresholds were tuned on those
    if t.shape[1] == 3:  # BGR, ITU-R 601 weights as cv2.COLOR_BGR2GRAY
        t = (0.114 * t[:, 0:1] + 0.587 * t[:, 1:2] + 0.299 * t[:, 2:3]).round()
    h, w = t.shape[-2:]
    scale = min(1.0, downscale_to / max(h, w))
    if scale < 1.0:
        t = F.interpolate(t, size=(int(round(h * scale)), int(round(w * scale))), mode="area").round()
    return t.contiguous(), scale


def boxes_mask(
    boxes: Sequence[np.ndarray | None], shape: tuple[int, int], scale: float, pad: int, device: torch.device
) -> torch.Tensor:
    """(B, 1, h, w) bool: True inside each frame's full-resolution xyxy boxes (scaled, grown by ``pad``).

    Drawn with a 2-D prefix sum of +1/-1 corners, so the cost does not grow with the number of boxes."""
    h, w = shape
    diff = torch.zeros(len(boxes), h + 1, w + 1, device=device)
    for i, bx in enumerate(boxes):
        if bx is None or not len(bx):
            continue
        b = np.asarray(bx, np.float64).reshape(-1, 4) * scale
        x1 = np.clip(b[:, 0].astype(int) - pad, 0, w)
        y1 = np.clip(b[:, 1].astype(int) - pad, 0, h)
        x2 = np.clip(b[:, 2].astype(int) + pad + 1, 0, w)  # inclusive corner, as cv2.rectangle fills
        y2 = np.clip(b[:, 3].astype(int) + pad + 1, 0, h)
        ys = torch.as_tensor(np.concatenate([y1, y1, y2, y2]), device=device)
        xs = torch.as_tensor(np.concatenate([x1, x2, x1, x2]), device=device)
        vals = torch.as_tensor(
            np.concatenate([np.ones_like(x1), -np.ones_like(x1), -np.ones_like(x1), np.ones_like(x1)]),
            dtype=diff.dtype,
            device=device,
        )
        diff[i].index_put_((ys, xs), vals, accumulate=True)
    return diff.cumsum(1).cumsum(2)[:, None, :h, :w] > 0.5


class TorchEgoMotionEstimator:
    def __init__(self, config: EgoMotionConfig | None = None, device: torch.device | str = "cpu"):
        self.config = config or EgoMotionConfig()
        self.device = torch.device(device)
        self._prev: torch.Tensor | None = None
        self._scale = 1.0
        self._pyramids: dict[int, list[torch.Tensor]] = {}  # the last frames' pyramids, by tensor storage

    def reset(self) -> None:
        self._prev = None
        self._pyramids = {}

    @property
    def scale(self) -> float:
        return self._scale

    def prepare(self, image: np.ndarray) -> torch.Tensor:
        """Grey, downscaled copy (1, 1, h, w) on the device."""
        grey, self._scale = to_grey_tensor(image, self.device, self.config.downscale_to)
        return grey

    def prepare_batch(self, images: np.ndarray | torch.Tensor) -> torch.Tensor:
        """A stack of frames (B, H, W, 3) in one upload: (B, 1, h, w)."""
        grey, self._scale = to_grey_tensor(images, self.device, self.config.downscale_to)
        return grey

    def _pyramid(self, grey: torch.Tensor) -> list[torch.Tensor]:
        key = grey.data_ptr()
        pyr = self._pyramids.get(key)
        if pyr is None or pyr[0].shape != grey.shape:
            pyr = pyramid(grey, PYRAMID_LEVELS)
            self._pyramids = {k: v for k, v in list(self._pyramids.items())[-2:]}
            self._pyramids[key] = pyr
        return pyr

    # ------------------------------------------------------------------------------------------------------
    def register(
        self,
        prev: torch.Tensor,
        cur: torch.Tensor,
        exclude_xyxy: Sequence[np.ndarray | None] | None = None,
        scale: float | None = None,
        prev_pyr: list[torch.Tensor] | None = None,
        cur_pyr: list[torch.Tensor] | None = None,
    ) -> list[EgoMotion]:
        """Motion from each ``prev[i]`` to ``cur[i]`` (B, 1, h, w), all pairs at once. ``exclude_xyxy``: per pair,
        vehicle boxes (full resolution) kept free of corners; ``scale``: small = full * scale."""
        s = self._scale if scale is None else scale
        b, _, h, w = prev.shape
        cfg = self.config
        exclude = None
        if exclude_xyxy is not None and any(x is not None and len(x) for x in exclude_xyxy):
            exclude = boxes_mask(exclude_xyxy, (h, w), s, EXCLUDE_PAD, prev.device)
        min_dist = max(6, int(min(h, w) / 40))
        pts, valid = select_corners(prev, cfg.max_features, min_dist, exclude=exclude)
        prev_pyr = prev_pyr or pyramid(prev, PYRAMID_LEVELS)
        cur_pyr = cur_pyr or pyramid(cur, PYRAMID_LEVELS)
        nxt, status = lucas_kanade(prev_pyr, cur_pyr, pts, REGISTER_WINDOW)
        good = valid & status
        H_small, inl = ransac_homography(pts, nxt, good, cfg.ransac_px * s + 0.5)
        proj = _apply(H_small, pts.to(H_small.dtype))
        dist = torch.linalg.norm(proj - nxt.to(H_small.dtype), dim=-1)
        residual = torch.nanquantile(torch.where(inl, dist, torch.full_like(dist, float("nan"))), 0.9, dim=1)
        # one transfer to the host for the whole batch (one synchronisation, not four); float64 holds the float32
        # homographies and residuals and the counts exactly
        parts = (H_small.reshape(b, 9), inl.sum(1, keepdim=True), good.sum(1, keepdim=True), residual.reshape(b, 1))
        host = torch.cat([p.to(torch.float64) for p in parts], 1).cpu().numpy()
        H_np, n_inl, n_good, res_np = host[:, :9].reshape(b, 3, 3), host[:, 9], host[:, 10], host[:, 11]
        S = np.diag([s, s, 1.0])
        out = []
        for i in range(b):
            tracked, inliers = int(n_good[i]), int(n_inl[i])
            if tracked < 8:
                out.append(EgoMotion.identity())
                continue
            if inliers < max(8, 0.25 * tracked):
                out.append(EgoMotion(np.eye(3), inliers, tracked, False))
                continue
            H = np.linalg.inv(S) @ H_np[i].astype(np.float64) @ S
            out.append(EgoMotion(H / H[2, 2], inliers, tracked, True, float(res_np[i]) / s))
        return out

    def register_sequence(self, greys: torch.Tensor) -> list[EgoMotion]:
        """Ego-motion between consecutive frames of a stack (F, 1, h, w): F - 1 results, in one batched pass."""
        if len(greys) < 2:
            return []
        pyr = pyramid(greys, PYRAMID_LEVELS)
        return self.register(greys[:-1], greys[1:], prev_pyr=[p[:-1] for p in pyr], cur_pyr=[p[1:] for p in pyr])

    def update(self, grey_small: torch.Tensor, exclude_xyxy: np.ndarray | None = None) -> EgoMotion:
        """Estimate motion from the previous call's frame to this one. ``exclude_xyxy``: vehicle boxes (full res)."""
        prev, self._prev = self._prev, grey_small
        if prev is None or prev.shape != grey_small.shape:
            self._pyramid(grey_small)
            return EgoMotion.identity()
        return self.register(
            prev, grey_small, [exclude_xyxy], prev_pyr=self._pyramid(prev), cur_pyr=self._pyramid(grey_small)
        )[0]

    def ground_velocities(
        self, prev_small: torch.Tensor, cur_small: torch.Tensor, xyxy: np.ndarray, H_prev_to_cur: np.ndarray | None
    ) -> np.ndarray:
        """Image velocity (full-resolution px/frame) of what is inside each box, the drone's own motion removed;
        NaN where fewer than 3 of the box's 9 grid points were followed. As ``EgoMotionEstimator.ground_velocities``."""
        s = self._scale
        boxes = np.asarray(xyxy, np.float64).reshape(-1, 4) * s
        out = np.full((len(boxes), 2), np.nan)
        if not len(boxes) or prev_small is None or prev_small.shape != cur_small.shape:
            return out
        g = np.linspace(0.25, 0.75, 3)
        fx, fy = np.meshgrid(g, g)
        grid = np.column_stack([fx.ravel(), fy.ravel()])  # 9 points in the inner half of the box
        pts = np.concatenate([bx[:2] + grid * (bx[2:] - bx[:2]) for bx in boxes]).astype(np.float32)
        back_t, status = lucas_kanade(
            self._pyramid(cur_small),
            self._pyramid(prev_small),
            torch.as_tensor(pts, device=cur_small.device)[None],
            VELOCITY_WINDOW,
        )
        host = torch.cat([back_t[0].to(torch.float64), status[0, :, None].to(torch.float64)], 1).cpu().numpy()
        back, ok = host[:, :2], host[:, 2] > 0.5  # one transfer (one synchronisation), not two
        if H_prev_to_cur is not None:
            Hs = np.diag([s, s, 1.0]) @ H_prev_to_cur @ np.diag([1 / s, 1 / s, 1.0])
            p = np.column_stack([back, np.ones(len(back))]) @ Hs.T
            back = p[:, :2] / p[:, 2:3]
        own = (pts - back) / s
        for i in range(len(boxes)):
            sel = slice(9 * i, 9 * i + 9)
            if ok[sel].sum() >= 3:
                out[i] = np.median(own[sel][ok[sel]], axis=0)
        return out


def _apply(H: torch.Tensor, pts: torch.Tensor) -> torch.Tensor:
    p = torch.cat([pts, torch.ones_like(pts[..., :1])], -1) @ H.transpose(1, 2)
    return p[..., :2] / p[..., 2:]


def update_streams(
    estimators: Sequence[TorchEgoMotionEstimator],
    greys: Sequence[torch.Tensor],
    exclude_xyxy: Sequence[np.ndarray | None] | None = None,
) -> list[EgoMotion]:
    """Step several streams' estimators with their current frames in one batched registration per frame size.

    Same result as calling each estimator's ``update``; the streams' pairs share one corner search, one LK and one
    RANSAC pass (what keeps a GPU busy with many streams)."""
    exclude_xyxy = exclude_xyxy if exclude_xyxy is not None else [None] * len(greys)
    results: list[EgoMotion | None] = [None] * len(greys)
    groups: dict[tuple, list[int]] = {}
    prevs: dict[int, torch.Tensor] = {}
    for i, (est, g) in enumerate(zip(estimators, greys)):
        prev, est._prev = est._prev, g
        if prev is None or prev.shape != g.shape:
            results[i] = EgoMotion.identity()
            est._pyramid(g)
            continue
        prevs[i] = prev
        groups.setdefault((tuple(g.shape), est.scale, g.device), []).append(i)
    for (_, scale, _), idx in groups.items():
        prev_pyr = [torch.cat(level) for level in zip(*(estimators[i]._pyramid(prevs[i]) for i in idx))]
        cur_pyr = [torch.cat(level) for level in zip(*(estimators[i]._pyramid(greys[i]) for i in idx))]
        out = estimators[idx[0]].register(
            prev_pyr[0], cur_pyr[0], [exclude_xyxy[i] for i in idx], scale, prev_pyr, cur_pyr
        )
        for i, r in zip(idx, out):
            results[i] = r
    return results  # type: ignore[return-value]
