"""The motion layer in torch: ego-motion compensated background differencing and blob extraction, on any torch
device, batched over streams.

Same model and thresholds as ``vision.motion`` (read that module for why): the background and the previous frame
are warped by the ego-motion homography (``kornia.geometry.warp_perspective``), compared with the current frame,
thresholded against the footage's own noise, cleaned with kornia's morphology, and the foreground's connected
components become boxes. The background is a recursion over time, so the frames of one stream are processed one
after another; what batches is the streams (``update_streams``, ``blobs_batch``): one call per frame for all of
them.

Connected components run on the device too: every foreground pixel takes the largest pixel index among its
8-neighbours and then the label its label points to (pointer jumping), until nothing changes; the number of rounds
grows with the logarithm of a blob's size rather than its size. (On a CPU device the labels come from OpenCV, which is
an order of magnitude faster there; the partition is the same, tests/vision/gpu.)
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import kornia
import numpy as np
import torch
import torch.nn.functional as F

from vision.config import MotionConfig
from vision.motion import ALPHA, ALPHA_FOREGROUND, OUTSIDE, BackgroundAnchor

_BLUR = torch.tensor([0.25, 0.5, 0.25])  # cv2.GaussianBlur((3, 3), 0)'s kernel
_OPEN, _CLOSE = torch.ones(2, 2), torch.ones(3, 3)


def _median_per_image(a: torch.Tensor) -> torch.Tensor:
    """(B, 1, h, w) -> (B,): median of a strided sample, as ``vision.motion._fast_median``."""
    return torch.quantile(a[:, 0, ::4, ::4].flatten(1), 0.5, dim=1)


class TorchMotionField:
    """Foreground (restricted to the road when given), two-frame change and unrestricted foreground as (1, h, w)
    bool tensors on the device; ``mask`` / ``changed`` / ``unrestricted`` give the uint8 arrays of
    ``vision.motion.MotionField`` (copied to the host on first use)."""

    def __init__(
        self, mask: torch.Tensor, scale: float, changed: torch.Tensor | None, unrestricted: torch.Tensor | None
    ):
        self.mask_t, self.changed_t, self.unrestricted_t, self.scale = mask, changed, unrestricted, scale
        self._host: dict[str, np.ndarray | None] = {}

    def _np(self, name: str) -> np.ndarray | None:
        if name not in self._host:
            t = getattr(self, name + "_t")
            self._host[name] = None if t is None else (t[0].to(torch.uint8) * 255).cpu().numpy()
        return self._host[name]

    mask = property(lambda self: self._np("mask"))
    changed = property(lambda self: self._np("changed"))
    unrestricted = property(lambda self: self._np("unrestricted"))

    def moving_fraction(self, xyxy: np.ndarray, on_road_only: bool = True) -> np.ndarray:
        """Share of foreground pixels inside each full-resolution box, from an integral image on the device."""
        out = np.zeros(len(xyxy), np.float32)
        m = self.mask_t if on_road_only or self.unrestricted_t is None else self.unrestricted_t
        if m is None or not len(xyxy):
            return out
        h, w = m.shape[-2:]
        integral = F.pad(m[0].to(torch.float64).cumsum(0).cumsum(1), (1, 0, 1, 0))
        b = np.round(np.asarray(xyxy, np.float64) * self.scale).astype(np.int64)
        b[:, [0, 2]] = b[:, [0, 2]].clip(0, w)
        b[:, [1, 3]] = b[:, [1, 3]].clip(0, h)
        bt = torch.as_tensor(b, device=m.device)
        x1, y1, x2, y2 = bt.T
        s = integral[y2, x2] - integral[y1, x2] - integral[y2, x1] + integral[y1, x1]
        area = ((x2 - x1) * (y2 - y1)).to(torch.float64)
        frac = torch.where(area > 0, s / area.clamp(min=1), torch.zeros_like(s))
        return frac.cpu().numpy().astype(np.float32)


def _warp_with_border(
    images: torch.Tensor, H: torch.Tensor, size: tuple[int, int], border: float = -1.0
) -> torch.Tensor:
    """``cv2.warpPerspective`` with a constant ``border`` value, for (B, C, h, w) images: zero padding plus a warped
    ones-channel gives the identical value, (inside part) + border x (outside share), so the two backends agree at
    the edges as well."""
    stack = torch.cat([images, torch.ones_like(images[:, :1])], 1)
    warped = kornia.geometry.transform.warp_perspective(
        stack, H.to(images.dtype), size, mode="bilinear", padding_mode="zeros", align_corners=True
    )
    return warped[:, :-1] + border * (1.0 - warped[:, -1:])


def _state_update(
    cur: torch.Tensor,
    bg: torch.Tensor,
    prev: torch.Tensor,
    H: torch.Tensor,
    H_bg: torch.Tensor,
    min_contrast: float,
    frames_elapsed: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of the compensated background for a batch. ``cur`` already blurred, (B, 1, h, w); ``H`` (B, 3, 3)
    maps the previous frame onto this one, ``H_bg`` the background's anchor frame (downscaled pixels). Returns
    (foreground, changed, background in this frame's coordinates, learning rate, share of the frame the background
    covers)."""
    h, w = cur.shape[-2:]
    bg_w = _warp_with_border(bg, H_bg, (h, w), OUTSIDE)
    prev_w = _warp_with_border(prev, H, (h, w))
    covered = 1.0 - (bg_w < 0).flatten(1).float().mean(1)
    fresh = (bg_w < 0) | (prev_w < 0)  # uncovered by the drone's motion: no history yet
    bg_w = torch.where(fresh, cur, bg_w)
    prev_w = torch.where(fresh, cur, prev_w)
    diff_bg, diff_prev = (cur - bg_w).abs(), (cur - prev_w).abs()
    # thresholds relative to the footage's own noise (compression, texture, warp interpolation)
    thr = torch.clamp(4.0 * _median_per_image(diff_bg), min=min_contrast).view(-1, 1, 1, 1)
    fg = diff_bg > thr
    thr_prev = torch.clamp(4.0 * _median_per_image(diff_prev), min=0.75 * min_contrast).view(-1, 1, 1, 1)
    changed = diff_prev > thr_prev
    k = frames_elapsed.clamp(min=1).to(cur.dtype).view(-1, 1, 1, 1)
    alpha = torch.where(fg, 1 - (1 - ALPHA_FOREGROUND) ** k, 1 - (1 - ALPHA) ** k)
    # opening with a 2x2 square, anchored as OpenCV anchors it (erode towards the top left, dilate likewise)
    kernel = _OPEN.to(cur.device)
    fg = (
        kornia.morphology.dilation(
            kornia.morphology.erosion(fg.to(cur.dtype), kernel, origin=[1, 1]), kernel, origin=[0, 0]
        )
        > 0.5
    )
    return fg, changed, bg_w, alpha, covered


def _learn(
    det: "TorchMotionDetector",
    cur: torch.Tensor,
    bg_w: torch.Tensor,
    alpha: torch.Tensor,
    cur_host: np.ndarray,
    anchor_to_cur: np.ndarray,
    move_anchor: bool,
) -> None:
    """The background learns this frame: in this frame's coordinates when the anchor moves here, else in the
    anchor's (only this frame resampled), as ``vision.motion.MotionDetector.update``."""
    if move_anchor:
        det._bg = bg_w + alpha * (cur - bg_w)
        det.anchor.reset(cur_host)
        return
    h, w = cur.shape[-2:]
    back = torch.as_tensor(np.linalg.inv(anchor_to_cur), device=cur.device, dtype=cur.dtype)[None]
    cur_a = _warp_with_border(cur, back, (h, w), OUTSIDE)
    alpha_a = kornia.geometry.transform.warp_perspective(
        alpha, back, (h, w), mode="bilinear", padding_mode="zeros", align_corners=True
    )
    alpha_a = torch.where(cur_a < 0, torch.zeros_like(alpha_a), alpha_a)
    assert det._bg is not None
    det._bg = det._bg + alpha_a * (cur_a - det._bg)
    det.anchor.moved(anchor_to_cur)


def _host_grey(cur: torch.Tensor) -> np.ndarray:
    """A (1, 1, h, w) blurred grey frame on the host, as ``vision.motion.BackgroundAnchor`` takes it (its values are
    whole: uint8 is exact, and a quarter of the float copy)."""
    return cur[0, 0].to(torch.uint8).cpu().numpy()


class TorchMotionDetector:
    """Drop-in for ``vision.motion.MotionDetector`` taking the torch backend's (1, 1, h, w) grey tensors."""

    def __init__(self, config: MotionConfig | None = None, device: torch.device | str = "cpu"):
        self.config = config or MotionConfig()
        self.device = torch.device(device)
        self.reset()

    def reset(self) -> None:
        self._bg: torch.Tensor | None = None  # in the anchor frame's coordinates (vision.motion.BackgroundAnchor)
        self._prev: torch.Tensor | None = None
        self.anchor = BackgroundAnchor()

    def _blur(self, grey: torch.Tensor) -> torch.Tensor:
        k = _BLUR.to(grey.device, torch.float32)
        # rounded as OpenCV rounds its uint8 blur: the thresholds below were tuned on those values
        return kornia.filters.filter2d(grey.float(), (k[:, None] * k[None, :])[None], border_type="reflect").round()

    def update(
        self,
        grey_small,
        H_prev_to_cur_small: np.ndarray | None,
        scale: float,
        road_mask_small: np.ndarray | None = None,
        frames_elapsed: int = 1,
    ) -> TorchMotionField:
        return update_streams(
            [self], [grey_small], [H_prev_to_cur_small], [scale], [road_mask_small], [frames_elapsed]
        )[0]

    def blobs(self, field: TorchMotionField, min_area_px: int | None = None) -> np.ndarray:
        """Bounding boxes (full resolution xyxy) of foreground blobs that are moving now."""
        return blobs_batch([field], self.config, min_area_px)[0]


def _as_grey(g, device: torch.device) -> torch.Tensor:
    t = torch.as_tensor(g, device=device)
    while t.ndim < 4:
        t = t[None]
    return t.float()


def update_streams(
    detectors: Sequence[TorchMotionDetector],
    greys: Sequence,
    Hs: Sequence[np.ndarray | None],
    scales: Sequence[float],
    roads: Sequence[np.ndarray | None] | None = None,
    frames_elapsed: Sequence[int] | None = None,
) -> list[TorchMotionField]:
    """One motion-layer step for several streams, each with its own detector (background): the streams whose frame
    sizes match go through one batched warp / difference / morphology pass. Same results as each detector's
    ``update``."""
    n = len(detectors)
    roads = roads if roads is not None else [None] * n
    frames_elapsed = frames_elapsed if frames_elapsed is not None else [1] * n
    out: list[TorchMotionField | None] = [None] * n
    groups: dict[tuple, list[int]] = {}
    curs = []
    for i, det in enumerate(detectors):
        cur = det._blur(_as_grey(greys[i], det.device))
        curs.append(cur)
        h, w = cur.shape[-2:]
        if det._bg is None or det._bg.shape != cur.shape or Hs[i] is None:
            # no usable ego-motion: start the background afresh rather than compare misaligned frames
            det._bg, det._prev = cur.clone(), cur
            det.anchor.reset(_host_grey(cur))
            empty = torch.zeros((1, h, w), dtype=torch.bool, device=cur.device)
            out[i] = TorchMotionField(empty, scales[i], empty, empty)
            continue
        groups.setdefault((tuple(cur.shape), cur.device, det.config.min_contrast), []).append(i)
    for (_, device, min_contrast), idx in groups.items():
        cur = torch.cat([curs[i] for i in idx])
        bg = torch.cat([t for i in idx if (t := detectors[i]._bg) is not None])
        prev = torch.cat([t for i in idx if (t := detectors[i]._prev) is not None])
        H = torch.as_tensor(np.stack([np.asarray(Hs[i]) for i in idx]), device=device, dtype=torch.float32)
        hosts = [_host_grey(curs[i]) for i in idx]  # one copy a frame: the anchor's registration and its move
        anchored = [
            detectors[i].anchor.to_current(
                np.asarray(Hs[i]), hosts[j], detectors[i].config.anchored_background_coverage is not None
            )
            for j, i in enumerate(idx)
        ]
        H_bg = torch.as_tensor(np.stack([a for a, _ in anchored]), device=device, dtype=torch.float32)
        elapsed = torch.as_tensor([frames_elapsed[i] for i in idx], device=device)
        fg, changed, bg_w, alpha, covered = _state_update(cur, bg, prev, H, H_bg, min_contrast, elapsed)
        covered_host = covered.tolist()
        for j, i in enumerate(idx):
            det = detectors[i]
            keep = det.config.anchored_background_coverage
            move = keep is None or anchored[j][1] or covered_host[j] < keep
            _learn(det, cur[j : j + 1], bg_w[j : j + 1], alpha[j : j + 1], hosts[j], anchored[j][0], move)
            det._prev = cur[j : j + 1]
            on_road = fg[j]
            if roads[i] is not None:
                on_road = on_road & (torch.as_tensor(roads[i], device=device) > 0)[None]
            out[i] = TorchMotionField(on_road, scales[i], changed[j], unrestricted=fg[j])
    return out  # type: ignore[return-value]


CONVERGENCE_EVERY = 4  # label-propagation rounds between two convergence tests (each one a host synchronisation)


def connected_components(mask: torch.Tensor, max_rounds: int = 10_000) -> torch.Tensor:
    """8-connected components of a (B, h, w) bool mask: each foreground pixel gets the 1-based raster index of its
    component's last pixel (0 = background). Label propagation with pointer jumping, all on the device."""
    b, h, w = mask.shape
    idx = torch.arange(1, h * w + 1, device=mask.device, dtype=torch.float32).view(1, h, w)  # exact below 2^24
    labels = torch.where(mask, idx, torch.zeros((), device=mask.device))
    for r in range(max_rounds):
        grown = F.max_pool2d(labels[:, None], 3, 1, 1)[:, 0] * mask
        flat = grown.flatten(1)
        ptr = (flat.long() - 1).clamp(min=0)
        jumped = flat.gather(1, ptr)
        jumped = flat.gather(1, (jumped.long() - 1).clamp(min=0)) * mask.flatten(1)
        jumped = jumped.view(b, h, w)
        # the convergence test waits for the device (a host synchronisation): every CONVERGENCE_EVERY rounds only;
        # rounds past convergence change nothing (the labels are a fixed point), so the result is the same
        if (r + 1) % CONVERGENCE_EVERY == 0 and torch.equal(jumped, labels):
            break
        labels = jumped
    return labels.long()


def blobs_batch(
    fields: Sequence[TorchMotionField], config: MotionConfig, min_area_px: int | None = None
) -> list[np.ndarray]:
    """Boxes (full resolution xyxy) of the moving blobs of several fields of one size at once: closing,
    connected components, per-component box, area and changed-pixel count, the ghost test; as
    ``MotionDetector.blobs`` (blobs in OpenCV's label order)."""
    empty = np.zeros((0, 4), np.float32)
    if not fields:
        return []
    masks = torch.cat([f.mask_t for f in fields])  # (B, h, w)
    b, h, w = masks.shape
    closed = kornia.morphology.closing(masks[:, None].float(), _CLOSE.to(masks.device))[:, 0] > 0.5
    if closed.device.type == "cpu":  # OpenCV's labelling is an order of magnitude faster on a CPU; same partition
        labels = torch.stack(
            [torch.from_numpy(cv2.connectedComponents(c.numpy().astype(np.uint8), connectivity=8)[1]) for c in closed]
        ).long()
    else:
        labels = connected_components(closed)
    # no early exit on an empty mask: ``fg.any()`` would be one more host synchronisation, and nonzero() (which
    # synchronises anyway) gives no components, so every field gets no blobs below
    bi, ys, xs = (labels > 0).nonzero(as_tuple=True)
    key = bi * (h * w + 1) + labels[bi, ys, xs]
    comps, comp = torch.unique(key, return_inverse=True)
    m = len(comps)

    def reduce(values: torch.Tensor, how: str) -> torch.Tensor:
        init = torch.full((m,), h * w if how == "amin" else -1, device=masks.device, dtype=torch.long)
        return init.scatter_reduce(0, comp, values, reduce=how, include_self=False)

    x1, x2, y1, y2 = reduce(xs, "amin"), reduce(xs, "amax"), reduce(ys, "amin"), reduce(ys, "amax")
    first = reduce(ys * w + xs, "amin")  # raster order of each component's first pixel: OpenCV's label order
    area = torch.bincount(comp, minlength=m)
    changed_masks = [f.changed_t for f in fields if f.changed_t is not None]
    use_changed = len(changed_masks) == len(fields)
    if use_changed:
        changed = torch.cat(changed_masks)[bi, ys, xs]
        n_changed = torch.bincount(comp, weights=changed.float(), minlength=m)
    owner = comps // (h * w + 1)
    cols = [owner, first, x1, y1, x2 + 1, y2 + 1, area]
    if use_changed:  # in the same transfer to the host: one synchronisation per batch
        cols.append(n_changed.round().long())
    host = torch.stack(cols, 1).cpu().numpy()
    rows = host[:, :7]
    n_changed_np = host[:, 7] if use_changed else None
    out = []
    for i, f in enumerate(fields):
        min_area = max(2.0, (min_area_px or config.min_area_px) * f.scale**2)
        sel = rows[:, 0] == i
        r = rows[sel]
        keep = r[:, 6] >= min_area
        if n_changed_np is not None:
            # differs from the background but did not move since the last frame: a ghost
            keep &= n_changed_np[sel] >= np.maximum(2, 0.03 * r[:, 6])
        r = r[keep]
        r = r[np.argsort(r[:, 1], kind="stable")]
        out.append((r[:, 2:6].astype(np.float32) / f.scale).astype(np.float32) if len(r) else empty)
    return out
