"""Sparse optical flow in torch, batched over frame pairs: corner selection and pyramidal Lucas-Kanade.

kornia has the filters, pyramids and corner responses but no Lucas-Kanade tracker, so the tracker is written here in
plain tensor operations (``grid_sample`` patches, 2x2 normal equations), vectorised over frames and points. It
follows OpenCV's ``calcOpticalFlowPyrLK``: the same window, levels and iteration count, coarse to fine.
"""

from __future__ import annotations

import kornia
import torch
import torch.nn.functional as F

LK_ITERATIONS = 10  # per pyramid level (OpenCV stops at 30 or a 0.01 px step; 20 changed nothing measurable on M1303)
LK_MIN_EIGEN = 0.1  # (grey levels / px)^2: OpenCV's minEigThreshold 1e-4 in its units (Scharr x32, / 2^20); a patch
# without texture in both directions cannot be followed


def pyramid(images: torch.Tensor, levels: int) -> list[torch.Tensor]:
    """Gaussian pyramid, finest first: ``levels`` + 1 images of (B, 1, h, w)."""
    out = [images]
    for _ in range(levels):
        out.append(kornia.geometry.transform.pyrdown(out[-1]))
    return out


def min_eigen_response(grey: torch.Tensor, block: int = 7) -> torch.Tensor:
    """Shi-Tomasi response: the smaller eigenvalue of the structure tensor summed over a ``block`` square, as
    ``cv2.cornerMinEigenVal(blockSize=7)`` (kornia's ``gftt_response`` sums over a sigma-1 Gaussian: a smaller
    window, whose corners measured noisier to follow on real footage)."""
    g = kornia.filters.spatial_gradient(grey, mode="sobel", normalized=False)[:, 0]
    dx, dy = g[:, 0:1], g[:, 1:2]
    s = kornia.filters.box_blur(torch.cat([dx * dx, dy * dy, dx * dy], 1), (block, block), border_type="reflect")
    xx, yy, xy = s[:, 0:1], s[:, 1:2], s[:, 2:3]
    return 0.5 * (xx + yy - ((xx - yy) ** 2 + 4 * xy * xy).clamp(min=0).sqrt())


def select_corners(
    grey: torch.Tensor, max_corners: int, min_distance: int, quality: float = 0.01, exclude: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shi-Tomasi corners spread over the image, like ``cv2.goodFeaturesToTrack``.

        ``grey``: (B, 1, h, w) in [0, 255]; ``exclude``: (B, 1, h, w) bool, True where no corner may be taken (vehicles).
        Returns points (B, max_corners, 2) as x, y and a validity mask (B, max_corners). At most one corner per
        ``min_distance`` cell and none closer than that to a stronger one in a neighbouring cell (OpenCV's greedy
    strongest-first rule, done in parallel; it can keep slightly fewer), local maxima
        of the response above ``quality`` times the image's best.
    """
    b, _, h, w = grey.shape
    resp = min_eigen_response(grey / 255.0)
    local_max = resp == F.max_pool2d(resp, 3, 1, 1)
    if exclude is not None:  # before the quality floor, as OpenCV: a vehicle's strong corners must not raise it
        resp = resp.masked_fill(exclude, 0.0)
    floor = quality * resp.flatten(1).amax(1).view(b, 1, 1, 1)
    keep = local_max & (resp > floor) & (resp > 0)
    resp = torch.where(keep, resp, torch.zeros_like(resp))
    cell = max(1, int(min_distance))
    best, idx = F.max_pool2d(resp, cell, cell, return_indices=True, ceil_mode=True)  # (B, 1, gh, gw)
    # the best corner of each cell, dropped where a stronger one in a neighbouring cell is closer than min_distance
    x, y = (idx % w).to(grey.dtype), (idx // w).to(grey.dtype)
    pad = (1, 1, 1, 1)
    nb_best, nb_x, nb_y = F.pad(best, pad), F.pad(x, pad, value=-1e9), F.pad(y, pad, value=-1e9)
    gh, gw = best.shape[-2:]
    beaten = torch.zeros_like(best, dtype=torch.bool)
    for dy in range(3):
        for dx in range(3):
            if dy == 1 and dx == 1:
                continue
            nb = nb_best[..., dy : dy + gh, dx : dx + gw]
            dist2 = (nb_x[..., dy : dy + gh, dx : dx + gw] - x) ** 2 + (nb_y[..., dy : dy + gh, dx : dx + gw] - y) ** 2
            beaten |= (nb > best) & (dist2 < min_distance**2)
    best = best.masked_fill(beaten, 0.0)
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


def _to_grid(xy: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Pixel coordinates -> grid_sample's [-1, 1] (align_corners=True)."""
    return xy * torch.tensor([2.0 / max(w - 1, 1), 2.0 / max(h - 1, 1)], device=xy.device, dtype=xy.dtype) - 1


def _sample(img: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """Bilinear samples of img (B, C, h, w) at normalised coordinates (B, N, P, 2) -> (B, C, N, P)."""
    return F.grid_sample(img, grid, mode="bilinear", padding_mode="border", align_corners=True)


def lucas_kanade(
    prev_pyr: list[torch.Tensor],
    cur_pyr: list[torch.Tensor],
    pts: torch.Tensor,
    win: int,
    iterations: int = LK_ITERATIONS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Follow ``pts`` (B, N, 2; finest-level pixels) from the previous frames to the current ones.

    Returns the new positions (B, N, 2) and a status mask (B, N): False where the patch had no texture or the point
    left the image. Iterations stop early once no point moves by more than 0.01 px (OpenCV's criterion).
    """
    offsets = _patch_offsets(win, pts.device, pts.dtype)
    guess = torch.zeros_like(pts)
    status = torch.ones(pts.shape[:2], dtype=torch.bool, device=pts.device)
    for level in range(len(prev_pyr) - 1, -1, -1):
        scale = 0.5**level
        prev, cur = prev_pyr[level], cur_pyr[level]
        h, w = prev.shape[-2:]
        to_unit = torch.tensor([2.0 / max(w - 1, 1), 2.0 / max(h - 1, 1)], device=pts.device, dtype=pts.dtype)
        patch = _to_grid(pts[:, :, None, :] * scale + offsets, h, w)  # (B, N, P, 2) normalised
        grads = kornia.filters.spatial_gradient(prev, mode="sobel", normalized=True)[:, 0]  # (B, 2, h, w)
        sampled = _sample(torch.cat([prev, grads], 1), patch)  # (B, 3, N, P)
        tmpl, ix, iy = sampled[:, 0], sampled[:, 1], sampled[:, 2]
        gxx, gxy, gyy = (ix * ix).sum(-1), (ix * iy).sum(-1), (iy * iy).sum(-1)
        det = gxx * gyy - gxy * gxy
        # smallest eigenvalue of the structure tensor per window pixel, as OpenCV tests it
        n_px = offsets.shape[0]
        tr, disc = (gxx + gyy) / n_px, ((gxx - gyy) ** 2 + 4 * gxy**2).sqrt() / n_px
        min_eig = (tr - disc) / 2
        if level == 0:
            status &= min_eig >= LK_MIN_EIGEN
        inv_det = torch.where(det.abs() > 1e-9, 1.0 / det, torch.zeros_like(det))
        d = torch.zeros_like(pts)
        for it in range(iterations):
            moved = _sample(cur, patch + ((guess + d) * to_unit)[:, :, None, :])[:, 0]
            err = tmpl - moved
            bx, by = (err * ix).sum(-1), (err * iy).sum(-1)
            step = torch.stack([(gyy * bx - gxy * by) * inv_det, (gxx * by - gxy * bx) * inv_det], -1)
            d = d + step
            if it % 3 == 2 and float(step.abs().max()) < 0.01:
                break
        guess = guess + d
        if level > 0:
            guess = guess * 2
    out = pts + guess
    h, w = prev_pyr[0].shape[-2:]
    inside = (out[..., 0] >= 0) & (out[..., 0] <= w - 1) & (out[..., 1] >= 0) & (out[..., 1] <= h - 1)
    status &= inside & torch.isfinite(out).all(-1)
    return out, status
