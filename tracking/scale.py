"""Ground scale: how pixels of the current frame map to ground metres, from the best source available.

Preference order: telemetry (altitude + camera + gimbal -> ground homography), user calibration (metres per pixel,
or image points with their ground / WGS84 coordinates), and last the vehicles themselves (``tracking.vehicle_size``:
measured vehicle lengths and widths against class priors, one scale for a nadir view, a ground-plane fit that
varies with the image row for an oblique one), which is marked low-confidence and carries its own uncertainty.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from tracking.config import CalibrationConfig, SpeedConfig
from tracking.types import ScaleSource
from tracking.vehicle_size import SizeModel, VehicleSizeScale
from vision.camera import enu_to_lonlat, image_to_ground_homography, local_scale, local_scales, lonlat_to_enu
from vision.types import CameraPose

# 1-sigma relative error of the scale, by source: altitude/focal tolerances; hand-placed points; car-length spread.
SCALE_REL_SIGMA = {ScaleSource.TELEMETRY: 0.04, ScaleSource.CALIBRATION: 0.03, ScaleSource.SIZE_PRIOR: 0.15}


@dataclass
class GroundFrame:
    """Pixel -> ground mapping valid for one frame."""

    H_img_to_ground: np.ndarray
    source: str
    origin_lonlat: tuple[float, float] | None  # WGS84 of ground (0, 0), when known
    size_model: SizeModel | None = None  # the size prior's fit (anchor image), for its uncertainty and description
    H_cur_to_anchor: np.ndarray | None = None

    def rel_sigma_at(self, x: float, y: float) -> float:
        """1-sigma relative error of the scale at image point (x, y)."""
        if self.size_model is None:
            return SCALE_REL_SIGMA.get(self.source, 0.1)
        if self.H_cur_to_anchor is not None and self.size_model.oblique:
            p = self.H_cur_to_anchor @ np.array([x, y, 1.0])
            y = p[1] / p[2]
        return self.size_model.rel_sigma_at(y)

    @property
    def description(self) -> str:
        """The scale source in words, for outputs: e.g. 'size_prior (oblique, horizon at row -420, 57 vehicles)'."""
        m = self.size_model
        if m is None:
            return self.source
        view = "nadir"
        if m.oblique:
            view = f"oblique, horizon at row {m.horizon_row:.0f}" + (
                f" from {m.horizon_from}" if m.horizon_from else ""
            )
        return f"{self.source} ({view}, {m.n_tracks} vehicles, segment {m.segment}, +-{100 * m.rel_sigma:.0f} %)"

    def valid(self, pts: np.ndarray, max_m_per_px: float) -> np.ndarray:
        """Points whose ground position can be trusted: in front of the camera (below the horizon) and not so far
        away that a pixel covers more than ``max_m_per_px``."""
        pts = np.asarray(pts, np.float64).reshape(-1, 2)
        H = self.H_img_to_ground
        w = np.column_stack([pts, np.ones(len(pts))]) @ H[2]
        # the size prior's oblique homography is built so that w = 1 / depth: positive in front of the camera
        ok = (w > 0 if self.size_model is not None and self.size_model.oblique else w != 0) & np.isfinite(w)
        if ok.any():
            ok[ok] = local_scales(H, pts[ok]) <= max_m_per_px
        return ok

    def to_ground(self, pts: np.ndarray) -> np.ndarray:
        pts = np.asarray(pts, np.float64).reshape(-1, 2)
        h = np.column_stack([pts, np.ones(len(pts))]) @ self.H_img_to_ground.T
        return h[:, :2] / h[:, 2:3]

    def to_lonlat(self, ground: np.ndarray) -> np.ndarray | None:
        if self.origin_lonlat is None or not len(ground):
            return None
        lon, lat = enu_to_lonlat(ground[:, 0], ground[:, 1], *self.origin_lonlat)
        return np.column_stack([lon, lat])

    def metres_per_pixel(self, x: float, y: float) -> float:
        return local_scale(self.H_img_to_ground, x, y)


def load_calibration(value: str) -> CalibrationConfig:
    """``--calibration``: a number (metres per pixel) or a JSON file.

    JSON forms: ``{"metres_per_pixel": 0.05}``; ``{"image_points": [[x,y]...], "ground_points_m": [[e,n]...]}``;
    ``{"image_points": ..., "lonlat_points": [[lon,lat]...]}``; or georeferenced frame corners
    ``{"coordinates": [[lon,lat] x4]}`` (top-left, top-right, bottom-right, bottom-left, as map video overlays use).
    """
    try:
        return CalibrationConfig(metres_per_pixel=float(value))
    except ValueError:
        pass
    path = Path(value)
    if not path.is_file():
        raise ValueError(f"{value}: calibration is neither a number (metres per pixel) nor an existing JSON file")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{path}: calibration file is not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})"
        ) from None
    if isinstance(data, dict) and "coordinates" in data and "lonlat_points" not in data:
        data = {"lonlat_points": data["coordinates"]}
    try:
        cal = CalibrationConfig.model_validate(data)
    except Exception as exc:
        raise ValueError(f"{path}: invalid calibration ({str(exc).splitlines()[0]})") from None
    if not cal.is_set:
        raise ValueError(f"{path}: calibration needs metres_per_pixel, ground_points_m or lonlat_points")
    n_world = len(cal.ground_points_m or cal.lonlat_points or [])
    if (cal.ground_points_m or cal.lonlat_points) and n_world < 4:
        raise ValueError(f"{path}: calibration needs at least 4 points, got {n_world}")
    if cal.image_points is not None and len(cal.image_points) != n_world:
        raise ValueError(f"{path}: {len(cal.image_points)} image points but {n_world} ground points")
    return cal


class GroundScale:
    """Gives the ``GroundFrame`` of each frame. ``H_cur_to_first`` (from ego-motion) carries a calibration made on the
    first frame to later frames."""

    def __init__(
        self, calibration: CalibrationConfig, speed: SpeedConfig, width: int, height: int, constant: bool = False
    ):
        self.cal = calibration
        self.speed_cfg = speed
        self.width, self.height = width, height
        self.constant = constant  # baseline: one scale for the whole run, no telemetry, no ego-motion
        self._cal_frame = self._calibration_frame()
        self.sizes = VehicleSizeScale(speed, width, height)
        self._telemetry_seen = False
        self._frozen: GroundFrame | None = None

    def _calibration_frame(self) -> GroundFrame | None:
        c = self.cal
        if c.metres_per_pixel:
            s = c.metres_per_pixel
            # image y grows downwards, north grows upwards
            return GroundFrame(
                np.array([[s, 0, -s * self.width / 2], [0, -s, s * self.height / 2], [0, 0, 1.0]]),
                ScaleSource.CALIBRATION,
                None,
            )
        if c.ground_points_m or c.lonlat_points:
            img = c.image_points or [(0, 0), (self.width, 0), (self.width, self.height), (0, self.height)]
            origin = None
            if c.lonlat_points:
                ll = np.asarray(c.lonlat_points, np.float64)
                origin = (float(ll[:, 0].mean()), float(ll[:, 1].mean()))
                e, n = lonlat_to_enu(ll[:, 0], ll[:, 1], *origin)
                ground = np.column_stack([e, n])
            else:
                ground = np.asarray(c.ground_points_m, np.float64)
            H, _ = cv2.findHomography(np.asarray(img, np.float64), ground, 0)
            if H is None:
                raise ValueError("calibration points are degenerate (collinear or repeated)")
            return GroundFrame(H, ScaleSource.CALIBRATION, origin)
        return None

    def observe_vehicles(
        self,
        t: float,
        image: np.ndarray,
        boxes: np.ndarray,
        track_ids: np.ndarray,
        class_ids: np.ndarray,
        from_detector: np.ndarray,
        H_cur_to_first: np.ndarray | None,
    ) -> None:
        """This frame's tracked vehicles (measured boxes, ids, classes, whether the detector saw them), for the size
        prior. Skipped when telemetry or a calibration gives the scale anyway."""
        if self._cal_frame is not None or self._telemetry_seen:
            return
        self.sizes.observe(t, image, boxes, track_ids, class_ids, from_detector, H_cur_to_first)

    def size_prior_frame(self, H_cur_to_first: np.ndarray | None = None, t: float | None = None) -> GroundFrame | None:
        """The vehicle-size scale for the current frame (None until enough vehicles were measured)."""
        m = self.sizes.model(t)
        if m is None:
            return None
        H_cur_to_anchor = np.eye(3)
        if H_cur_to_first is not None:
            H_cur_to_anchor = np.linalg.inv(self.sizes.anchor_to_first()) @ H_cur_to_first
        H = m.image_to_ground() @ H_cur_to_anchor
        return GroundFrame(H, ScaleSource.SIZE_PRIOR, None, m, H_cur_to_anchor)

    def frame(
        self, pose: CameraPose | None, H_cur_to_first: np.ndarray | None, t: float | None = None
    ) -> GroundFrame | None:
        if self.constant:
            return self._constant_frame(pose)
        if pose is not None:
            G = image_to_ground_homography(pose, self.width, self.height)
            if G is not None:
                self._telemetry_seen = True
                origin = (pose.lon, pose.lat) if pose.lat is not None and pose.lon is not None else None
                return GroundFrame(G, ScaleSource.TELEMETRY, origin)
        if self._cal_frame is not None:
            H = self._cal_frame.H_img_to_ground
            if H_cur_to_first is not None and not self.cal.metres_per_pixel:
                H = H @ H_cur_to_first
            return GroundFrame(H, ScaleSource.CALIBRATION, self._cal_frame.origin_lonlat)
        return self.size_prior_frame(H_cur_to_first, t)

    def _constant_frame(self, pose: CameraPose | None) -> GroundFrame | None:
        """One metres-per-pixel value for the whole run, fixed the first time one is known."""
        if self._frozen is not None:
            return self._frozen
        g = None
        if self._cal_frame is not None:
            g = self._cal_frame
        elif pose is not None and (G := image_to_ground_homography(pose, self.width, self.height)) is not None:
            g = GroundFrame(G, ScaleSource.TELEMETRY, None)
        if g is None:
            g = self.size_prior_frame()
            if g is None:
                return None
        s = g.metres_per_pixel(self.width / 2, self.height / 2)
        if not math.isfinite(s):
            return None
        self._frozen = GroundFrame(np.array([[s, 0, 0], [0, -s, 0], [0, 0, 1.0]]), g.source, None, g.size_model)
        return self._frozen
