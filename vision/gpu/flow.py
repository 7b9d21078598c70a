"""Sparse optical flow in torch, batched over frame pairs: corner selection and pyramidal Lucas-Kanade.

kornia has the filters, pyramids and corner responses but no Lucas-Kanade tracker, so the tracker is written here in
plain tensor operations (``grid_sample`` patches, 2x2 normal equations), vectorised over frames and points. It
follows OpenCV's ``calcOpticalFlowPyrLK``: the same window, levels and iteration count, coarse to fine.
"""
from __future__ import annotations

import kornia
import torch
import torch.nn.functional as F

LK_ITERATIONS = 10  # per pyramid level (OpenCV's default stops at 30 or a 0.01 px step; 10 reach that on drone footage)
LK_MIN_EIGEN = 0.1  # (grey levels / px)^2: OpenCV's minEigThreshold 1e-4 in its units (Scharr x32, / 2^20); a patch
# without texture in both directions cannot be followed


def pyramid(images: torch.Tensor, levels: int) -> list[torch.Tensor]:
    """Gaussian pyramid, finest first: ``levels`` + 1 images of (B, 1, h, w)."""
    out = [images]
    for _ in range(levels):
        out.append(kornia.geometry.transform.pyrdown(out[-1]))
    return out


def select_corners(grey: torch.Tensor, max_corners: int, min_distance: int, quality: float = 0.01,
                   exclude: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Shi-Tomasi corners spread over the image, like ``cv2.goodFeaturesToTrack``.

    ``grey``: (B, 1, h, w) in [0, 255]; ``exclude``: (B, 1, h, w) bool, True where no corner may be taken (vehicles).
    Returns points (B, max_corners, 2) as x, y and a validity mask (B, max_corners). At most one corner per
    ``min_distance`` cell (OpenCV enforces the distance exactly; a grid is the parallel equivalent), local maxima
    of the response above ``quality`` times the image's best.
    """
    b, _, h, w = grey.shape
    resp = kornia.feature.gftt_response(grey / 255.0, grads_mode="sobel")
    local_max = resp == F.max_pool2d(resp, 3, 1, 1)
    floor = quality * resp.flatten(1).amax(1).view(b, 1, 1, 1)
    keep = local_max & (resp > floor) & (resp > 0)
    if exclude is not None:
        keep &= ~exclude
    resp = torch.where(keep, resp, torch.zeros_like(resp))
    cell = max(1, int(min_distance))
    best, idx = F.max_pool2d(resp, cell, cell, return_indices=True, ceil_mode=True)
    best, idx = best.flatten(1), idx.flatten(1)
    k = min(max_corners, best.shape[1])
    top, order = best.topk(k, dim=1)
    flat = idx.gather(1, order)
    pts = torch.stack([(flat % w).to(grey.dtype), (flat // w).to(grey.dtype)], dim=2)
    return pts, top > 0


def _patch_offsets(win: int, device, dtype) -> torch.Tensor:
    r = torch.arange(win, device=device, dtype=dtype) - (win - 1) / 2
    yy, xx = torch.meshgrid(r, r, indexing="ij")
    return torch.stack([xx.reshape(-1), yy.reshape(-1)], 1)  # (win*win, 2)


def _sample(img: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
    """Bilinear samples of img (B, C, h, w) at pixel coordinates xy (B, N, P, 2) -> (B, C, N, P)."""
    h, w = img.shape[-2:]
    g = torch.stack([xy[..., 0] * (2.0 / max(w - 1, 1)) - 1, xy[..., 1] * (2.0 / max(h - 1, 1)) - 1], -1)
    return F.grid_sample(img, g, mode="bilinear", padding_mode="border", align_corners=True)


def lucas_kanade(prev_pyr: list[torch.Tensor], cur_pyr: list[torch.Tensor], pts: torch.Tensor, win: int,
                 iterations: int = LK_ITERATIONS) -> tuple[torch.Tensor, torch.Tensor]:
    """Follow ``pts`` (B, N, 2; finest-level pixels) from the previous frames to the current ones.

    Returns the new positions (B, N, 2) and a status mask (B, N): False where the patch had no texture or the point
    left the image.
    """
    offsets = _patch_offsets(win, pts.device, pts.dtype)
    guess = torch.zeros_like(pts)
    status = torch.ones(pts.shape[:2], dtype=torch.bool, device=pts.device)
    for level in range(len(prev_pyr) - 1, -1, -1):
        scale = 0.5 ** level
        prev, cur = prev_pyr[level], cur_pyr[level]
        p = pts * scale
        patch = p[:, :, None, :] + offsets  # (B, N, P, 2)
        grads = kornia.filters.spatial_gradient(prev, mode="sobel", normalized=True)[:, 0]  # (B, 2, h, w)
        sampled = _sample(torch.cat([prev, grads], 1), patch)  # (B, 3, N, P)
        tmpl, ix, iy = sampled[:, 0], sampled[:, 1], sampled[:, 2]
        gxx, gxy, gyy = (ix * ix).sum(-1), (ix * iy).sum(-1), (iy * iy).sum(-1)
        det = gxx * gyy - gxy * gxy
        # smallest eigenvalue of the structure tensor per window pixel, as OpenCV tests it
        n_px = offsets.shape[0]
        tr, disc = (gxx + gyy) / n_px, ((gxx - gyy) ** 2 + 4 * gxy ** 2).sqrt() / n_px
        min_eig = (tr - disc) / 2
        if level == 0:
            status &= min_eig >= LK_MIN_EIGEN
        inv_det = torch.where(det.abs() > 1e-9, 1.0 / det, torch.zeros_like(det))
        d = torch.zeros_like(pts)
        for _ in range(iterations):
            moved = _sample(cur, patch + (guess + d)[:, :, None, :])[:, 0]
            err = tmpl - moved
            bx, by = (err * ix).sum(-1), (err * iy).sum(-1)
            d = d + torch.stack([(gyy * bx - gxy * by) * inv_det, (gxx * by - gxy * bx) * inv_det], -1)
        guess = guess + d
        if level > 0:
            guess = guess * 2
    out = pts + guess
    h, w = prev_pyr[0].shape[-2:]
    inside = (out[..., 0] >= 0) & (out[..., 0] <= w - 1) & (out[..., 1] >= 0) & (out[..., 1] <= h - 1)
    status &= inside & torch.isfinite(out).all(-1)
    return out, status
