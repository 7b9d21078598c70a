"""The road layer: a per-frame road mask that vehicle detection is restricted to.

Sources of the mask, by configuration:
  * the U-Net, run every ``every_n_frames`` frames; in between, the last probability map is carried along by the
    ego-motion homography, so a moving drone does not pay for a network run per frame;
  * a fixed mask image (``mask_file``) or polygon (``polygon``) for a static camera.
Where moving tracked vehicles actually drive is remembered in a decaying heat map (warped like the mask) and fused
in: a vehicle's path is road even where the network missed it.
Internal maps live at a working resolution (the U-Net's input size); the returned mask is at frame size.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch

from vision.config import RoadConfig
from vision.road.unet import DEFAULT_LONG_SIDE, RoadUNet, load_checkpoint, predict_proba
from vision.types import Frame


class RoadMaskFileError(ValueError):
    """The configured fixed road mask cannot be used."""


def resolve_device(device: str) -> str:
    """ "cuda" when asked for (or "auto") and available, else "cpu"."""
    return "cuda" if device in ("cuda", "auto") and torch.cuda.is_available() else "cpu"


def _scaled_homography(h: np.ndarray, sx: float, sy: float) -> np.ndarray:
    """The same motion expressed in a grid scaled by (sx, sy): S H S^-1."""
    s = np.diag([sx, sy, 1.0])
    return s @ np.asarray(h, np.float64) @ np.linalg.inv(s)


class RoadSegmenter:
    """Road mask per frame; see the module docstring. Call ``update`` once per frame, in order."""

    # A vehicle path is painted with heat 1, which halves every TRACK_HALF_LIFE_FRAMES frames and stops counting
    # as road below TRACK_ROAD_LEVEL: 250 frames (10 s at 25 fps) bridge gaps in traffic, and paths are forgotten
    # soon after the drone has flown elsewhere.
    TRACK_HALF_LIFE_FRAMES = 250
    TRACK_ROAD_LEVEL = 0.5

    def __init__(self, config: RoadConfig, device: str = "auto", work_long_side: int | None = None):
        self.config = config
        self.device = resolve_device(device)
        self._model: RoadUNet | None = None
        self._fixed_mask_image: np.ndarray | None = None
        if config.mask_file:
            self._fixed_mask_image = cv2.imread(str(config.mask_file), cv2.IMREAD_GRAYSCALE)
            if self._fixed_mask_image is None:
                raise RoadMaskFileError(
                    f"{config.mask_file}: cannot read road mask image (expected an image, white = road)"
                )
            self.mode = "mask_file"
        elif config.polygon:
            if len(config.polygon) < 3:
                raise RoadMaskFileError(f"road polygon needs at least 3 points, got {len(config.polygon)}")
            self.mode = "polygon"
        elif config.enabled:
            self._model, self._long_side, _ = load_checkpoint(config.weights, self.device)
            self.mode = "unet"
        else:
            self.mode = "disabled"
        self.work_long_side = work_long_side or (self._long_side if self._model is not None else DEFAULT_LONG_SIDE)
        self._frame_size: tuple[int, int] | None = None  # (w, h)
        self._work_size: tuple[int, int] | None = None
        self._prob: np.ndarray | None = None  # U-Net road probability at work size
        self._fixed: np.ndarray | None = None  # fixed mask (0/255) at work size
        self._heat: np.ndarray | None = None  # track heat map at work size
        self._prev_centres: np.ndarray | None = None  # last moving centres, work coordinates of the current frame
        self._frames_since_run = 0
        self._mask: np.ndarray | None = None
        self._integral: np.ndarray | None = None
        self.unet_runs = 0

    def reset(self) -> None:
        """Forget everything about the previous video or stream (the model stays loaded)."""
        self._frame_size = None
        self._heat = None
        self._prev_centres = None
        self._prob = None
        self._mask = None
        self._integral = None

    def warm_up(self, width: int, height: int) -> None:
        """One U-Net pass on a blank frame of this size (CUDA only: its first call there builds cuDNN plans); keeps no
        state, so the stream's masks are as without it."""
        if self.mode != "unet" or not str(self.device).startswith("cuda"):
            return
        assert self._model is not None  # loaded for mode "unet"
        scale = min(1.0, self.work_long_side / max(width, height))
        work = (max(1, round(width * scale)), max(1, round(height * scale)))
        predict_proba(self._model, np.zeros((height, width, 3), np.uint8), self._long_side, self.device, out_size=work)

    # --- per frame -------------------------------------------------------------------------------------------
    def update(self, frame: Frame, homography_prev_to_cur: np.ndarray | None, frames_elapsed: int = 1) -> np.ndarray:
        """Road mask (uint8 0/255, frame size) for ``frame``.

        ``homography_prev_to_cur`` maps the previous call's frame pixels to this frame's; None means no known motion
        (static camera, or ego-motion unavailable) and the maps are kept as they are. ``frames_elapsed``: video frames
        since the previous call (the pipeline calls only on frames the detector runs on).
        """
        h, w = frame.image.shape[:2]
        if self._frame_size != (w, h):
            self._reset((w, h))
        elif homography_prev_to_cur is not None:
            self._warp(homography_prev_to_cur)
        if self._heat is not None:
            self._heat *= 0.5 ** (frames_elapsed / self.TRACK_HALF_LIFE_FRAMES)

        if self.mode == "unet":
            if self._prob is None or self._frames_since_run >= self.config.every_n_frames - 1:
                assert self._model is not None  # loaded for mode "unet"
                self._prob = predict_proba(
                    self._model, frame.image, self._long_side, self.device, out_size=self._work_size
                )
                self._frames_since_run = 0
                self.unet_runs += 1
            else:
                self._frames_since_run += frames_elapsed
        self._mask = self._compose()
        self._integral = None
        return self._mask

    def observe_tracks(self, centres_xy: np.ndarray, moving: np.ndarray) -> None:
        """Remember where moving vehicles are in the current frame (pixel centres, frame coordinates).

        Tracks carry no identities here, so each moving centre is linked to the nearest moving centre of the
        previous call (carried along by ego-motion) within a plausible per-frame displacement, and the segment
        between them is painted as road. A moving detection seen only once paints nothing: a single spurious
        "moving" blob on a roof does not make it road.
        """
        if self._work_size is None or not self.config.learn_from_tracks:
            return
        sx, sy = self._work_scale()
        assert self._heat is not None  # made with the work size
        centres = np.asarray(centres_xy, np.float64).reshape(-1, 2)[np.asarray(moving, bool).reshape(-1)] * (sx, sy)
        prev, self._prev_centres = self._prev_centres, centres
        if not len(centres) or prev is None or not len(prev):
            return
        long_side = max(self._work_size)
        radius = max(1, int(round(long_side / 150)))  # about a car's half-length at typical drone altitudes
        max_step = long_side / 20  # more than a fast vehicle moves between two frames
        dist = np.linalg.norm(centres[:, None, :] - prev[None, :, :], axis=2)
        paths = np.zeros_like(self._heat)
        for i, j in enumerate(dist.argmin(axis=1)):
            if dist[i, j] <= max_step:
                a, b = np.round(prev[j]).astype(int), np.round(centres[i]).astype(int)
                cv2.line(paths, (int(a[0]), int(a[1])), (int(b[0]), int(b[1])), 1.0, 2 * radius + 1)
        np.maximum(self._heat, paths, out=self._heat)

    def driven_within(self, xy: np.ndarray, frames: float) -> np.ndarray:
        """For each pixel point (frame coordinates): has a moving vehicle's path been painted there within about the
        last ``frames`` video frames (its heat not yet halved that often)? A lane is driven; a parking bay or a
        verge is not. All False while nothing is learnt (``learn_from_tracks`` off, or before the first frame)."""
        pts = np.asarray(xy, np.float64).reshape(-1, 2)
        if self._heat is None or self._work_size is None or not self.config.learn_from_tracks or not len(pts):
            return np.zeros(len(pts), bool)
        col, row = self._work_pixels(pts)
        return self._heat[row, col] >= 0.5 ** (frames / self.TRACK_HALF_LIFE_FRAMES)

    def surely_off_road(self, xy: np.ndarray, max_probability: float) -> np.ndarray:
        """For each pixel point (frame coordinates): does the U-Net call it road with at most ``max_probability``,
        with no vehicle path learnt there and no fixed road? Points it is unsure about are not off road."""
        pts = np.asarray(xy, np.float64).reshape(-1, 2)
        out = np.zeros(len(pts), bool)
        if self._prob is None or self.mode != "unet" or not len(pts):
            return out
        col, row = self._work_pixels(pts)
        out = self._prob[row, col] <= max_probability
        if self.config.learn_from_tracks and self._heat is not None:
            out &= self._heat[row, col] < self.TRACK_ROAD_LEVEL
        return out

    def _work_pixels(self, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Frame-pixel points (N, 2) as the work-size maps' column and row indices, clipped into the maps."""
        sx, sy = self._work_scale()
        w, h = self._sizes()[1]
        col = (pts[:, 0] * sx).clip(0, w - 1).astype(int)
        row = (pts[:, 1] * sy).clip(0, h - 1).astype(int)
        return col, row

    # --- results ---------------------------------------------------------------------------------------------
    @property
    def mask(self) -> np.ndarray | None:
        """The last mask returned by ``update`` (None before the first frame)."""
        return self._mask

    @property
    def road_fraction(self) -> float:
        """Fraction of the last frame that is road (1.0 before the first frame: nothing is excluded yet)."""
        return 1.0 if self._mask is None else float(np.count_nonzero(self._mask)) / self._mask.size

    def road_tiles(self, tile_boxes, min_fraction: float = 0.01) -> list[bool]:
        """For each detector tile (x0, y0, x1, y1 in frame pixels): is at least ``min_fraction`` of it road?"""
        boxes = np.asarray(tile_boxes, np.float64).reshape(-1, 4)
        if self._mask is None:
            return [True] * len(boxes)
        if self._integral is None:
            self._integral = cv2.integral((self._mask > 0).astype(np.uint8))
        h, w = self._mask.shape
        out = []
        for x0, y0, x1, y1 in boxes:
            x0, x1 = int(np.clip(np.floor(x0), 0, w)), int(np.clip(np.ceil(x1), 0, w))
            y0, y1 = int(np.clip(np.floor(y0), 0, h)), int(np.clip(np.ceil(y1), 0, h))
            area = (x1 - x0) * (y1 - y0)
            ii = self._integral
            road = ii[y1, x1] - ii[y0, x1] - ii[y1, x0] + ii[y0, x0] if area > 0 else 0
            out.append(bool(area > 0 and road >= min_fraction * area))
        return out

    # --- internals -------------------------------------------------------------------------------------------
    def _sizes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(frame size, work size), both (w, h); set by _reset on the first frame."""
        assert self._frame_size is not None and self._work_size is not None
        return self._frame_size, self._work_size

    def _work_scale(self) -> tuple[float, float]:
        frame_size, work_size = self._sizes()
        return work_size[0] / frame_size[0], work_size[1] / frame_size[1]

    def _reset(self, frame_size: tuple[int, int]) -> None:
        w, h = frame_size
        self._frame_size = frame_size
        scale = min(1.0, self.work_long_side / max(w, h))
        self._work_size = (max(1, round(w * scale)), max(1, round(h * scale)))
        self._prob = None
        self._heat = np.zeros(self._work_size[::-1], np.float32)
        self._prev_centres = None
        self._fixed = None
        fixed = None
        if self.mode == "mask_file":
            assert self._fixed_mask_image is not None  # read for mode "mask_file"
            fixed = cv2.resize(self._fixed_mask_image, (w, h), interpolation=cv2.INTER_NEAREST)
        elif self.mode == "polygon":
            fixed = np.zeros((h, w), np.uint8)
            cv2.fillPoly(fixed, [np.round(np.asarray(self.config.polygon, np.float64)).astype(np.int32)], 255)
        if fixed is not None:  # kept at work size, like the other maps
            small = cv2.resize(fixed, self._work_size, interpolation=cv2.INTER_AREA)
            self._fixed = np.where(small > 127, 255, 0).astype(np.uint8)

    def _warp(self, homography: np.ndarray) -> None:
        hw = _scaled_homography(homography, *self._work_scale())
        size = self._sizes()[1]
        assert self._heat is not None  # made with the work size
        if self._prob is not None:
            # Ground newly brought into view is unknown until the next U-Net run: count it as road, so vehicles
            # entering the frame are not suppressed for up to every_n_frames frames.
            self._prob = cv2.warpPerspective(
                self._prob, hw, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=1.0
            )
        self._heat = cv2.warpPerspective(
            self._heat, hw, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0.0
        )
        if self._prev_centres is not None and len(self._prev_centres):
            self._prev_centres = cv2.perspectiveTransform(self._prev_centres.reshape(-1, 1, 2), hw).reshape(-1, 2)

    def _compose(self) -> np.ndarray:
        (w, h), work_size = self._sizes()
        if self.mode == "disabled":
            return np.full((h, w), 255, np.uint8)
        # Everything is combined and dilated at work size and upsampled once: dilating a full-HD mask every frame
        # costs ~20 ms, at work size well under 1 ms; the edge moves by at most half a work pixel.
        work = np.zeros(work_size[::-1], np.uint8)
        if self._prob is not None:
            work[self._prob >= self.config.threshold] = 255
        if self._fixed is not None:
            work |= self._fixed
        if self.config.learn_from_tracks and self._heat is not None:  # made with the work size
            work[self._heat >= self.TRACK_ROAD_LEVEL] = 255
        if self.config.dilate_px > 0:
            r = max(1, int(round(self.config.dilate_px * max(self._work_scale()))))
            work = cv2.dilate(work, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
        # Linear resize then threshold gives smooth edges at frame size instead of work-size staircases.
        up = cv2.resize(work, (w, h), interpolation=cv2.INTER_LINEAR)
        return cv2.threshold(up, 127, 255, cv2.THRESH_BINARY)[1]
