"""The true camera of a synthetic clip: pinhole intrinsics and a pose per frame (drift, jitter, slow yaw).

World frame: x east, y north, z up, metres; the road surface is z = 0. Angles follow DJI: heading (yaw) from north
clockwise, gimbal pitch -90 looking straight down, roll positive clockwise as seen by the camera. Image pixel
coordinates follow OpenCV (pixel i's centre at i).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vision.synth.scene import SceneConfig, rng_for

FULL_FRAME_DIAGONAL_MM = 43.2666  # 36 x 24 mm: the "35 mm equivalent" reference


def intrinsics(cfg: SceneConfig) -> np.ndarray:
    """K for the video frame. DJI video is a 16:9 crop of the 4:3 sensor that keeps the horizontal field of view."""
    fx = cfg.camera.focal_length_mm / cfg.camera.sensor_width_mm * cfg.width
    return np.array([[fx, 0.0, (cfg.width - 1) / 2.0], [0.0, fx, (cfg.height - 1) / 2.0], [0.0, 0.0, 1.0]])


def focal_35mm_equivalent(cfg: SceneConfig) -> float:
    """What DJI writes as ``focal_len``: the physical focal length times the diagonal crop factor."""
    diag = math.hypot(cfg.camera.sensor_width_mm, cfg.camera.sensor_height_mm)
    return cfg.camera.focal_length_mm * FULL_FRAME_DIAGONAL_MM / diag


def rotation_world_to_camera(heading_deg: float, pitch_deg: float, roll_deg: float = 0.0) -> np.ndarray:
    """Rows: camera x (image right), y (image down), z (optical axis) in world ENU."""
    psi, phi = math.radians(heading_deg), math.radians(pitch_deg)
    forward = np.array([math.sin(psi), math.cos(psi), 0.0])
    right = np.array([math.cos(psi), -math.sin(psi), 0.0])
    z = math.cos(phi) * forward + np.array([0.0, 0.0, math.sin(phi)])
    x = right
    y = np.cross(z, x)
    if roll_deg:
        r = math.radians(roll_deg)
        x, y = math.cos(r) * x + math.sin(r) * y, -math.sin(r) * x + math.cos(r) * y
    return np.stack([x, y, z])


@dataclass
class CameraTrack:
    """Per-frame true poses. Arrays have one entry per frame (index 0 = frame 1)."""

    K: np.ndarray
    x: np.ndarray  # camera centre, east (m)
    y: np.ndarray  # camera centre, north (m)
    alt: np.ndarray  # height above the road (m)
    heading: np.ndarray  # deg
    pitch: np.ndarray  # deg
    roll: np.ndarray  # deg
    width: int
    height: int

    def __len__(self) -> int:
        return len(self.x)

    def rotation(self, i: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_rot_cache", {})
        if i not in cache:
            cache[i] = rotation_world_to_camera(self.heading[i], self.pitch[i], self.roll[i])
        return cache[i]

    def centre(self, i: int) -> np.ndarray:
        return np.array([self.x[i], self.y[i], self.alt[i]])

    def projection(self, i: int) -> np.ndarray:
        """3x4 P with pixel ~ P @ [X, Y, Z, 1]."""
        R = self.rotation(i)
        return self.K @ np.column_stack([R, -R @ self.centre(i)])

    def ground_homography(self, i: int) -> np.ndarray:
        """3x3 H with pixel ~ H @ [X, Y, 1] for points on the road plane."""
        P = self.projection(i)
        H = P[:, [0, 1, 3]]
        return H / H[2, 2]

    def project(self, i: int, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nx3 world points -> (Nx2 pixels, N depths). Depth <= 0 means behind the camera."""
        pts = np.asarray(pts, np.float64).reshape(-1, 3)
        h = pts @ self.projection(i)[:, :3].T + self.projection(i)[:, 3]
        depth = h[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            uv = h[:, :2] / depth[:, None]
        return uv, depth

    def image_to_ground(self, i: int, uv: np.ndarray) -> np.ndarray:
        Hinv = np.linalg.inv(self.ground_homography(i))
        uv = np.asarray(uv, np.float64).reshape(-1, 2)
        h = np.column_stack([uv, np.ones(len(uv))]) @ Hinv.T
        return h[:, :2] / h[:, 2:3]

    def metres_per_pixel(self, i: int) -> float:
        """Ground distance covered by one pixel at the image centre (mean of the x and y steps)."""
        cx, cy = self.K[0, 2], self.K[1, 2]
        g = self.image_to_ground(i, np.array([[cx, cy], [cx + 1, cy], [cx, cy + 1]]))
        return float((np.linalg.norm(g[1] - g[0]) + np.linalg.norm(g[2] - g[0])) / 2)

    def footprint(self, i: int, margin_px: float = 0.0) -> np.ndarray:
        """Ground polygon (4x2) seen by frame i."""
        w, h = self.width, self.height
        m = margin_px
        corners = np.array([[-m, -m], [w - 1 + m, -m], [w - 1 + m, h - 1 + m], [-m, h - 1 + m]], np.float64)
        return self.image_to_ground(i, corners)


def _smooth_noise(rng: np.random.Generator, t: np.ndarray, freqs_hz: tuple[float, ...]) -> np.ndarray:
    """Sum of sinusoids with random phases, unit peak amplitude: smooth, deterministic 'shake'."""
    out = np.zeros_like(t)
    for f in freqs_hz:
        out += np.sin(2 * math.pi * f * t + rng.uniform(0, 2 * math.pi)) * rng.uniform(0.5, 1.0)
    peak = np.abs(out).max() if len(out) else 0.0
    return out / peak if peak > 0 else out


def camera_track(cfg: SceneConfig, target_xy: tuple[float, float]) -> CameraTrack:
    """Poses for every frame: the optical axis starts on ``target_xy`` (plus a small random offset), then the drone
    drifts, its yaw turns slowly and the gimbal jitters."""
    rng = rng_for(cfg.seed, "camera")
    n = cfg.frame_count
    t = np.arange(n) / cfg.fps
    heading0 = float(rng.uniform(0, 360)) if cfg.heading_deg is None else float(cfg.heading_deg)
    pitch0 = cfg.gimbal_pitch_deg
    # Put the camera so that its optical axis meets the ground near the target.
    back = cfg.altitude_m / math.tan(math.radians(-pitch0)) if pitch0 > -89.999 else 0.0
    psi = math.radians(heading0)
    offset = rng.uniform(-0.08, 0.08, 2) * cfg.altitude_m
    cx0 = target_xy[0] + offset[0] - back * math.sin(psi)
    cy0 = target_xy[1] + offset[1] - back * math.cos(psi)

    drift_dir = rng.uniform(0, 2 * math.pi)
    speed = cfg.drift_mps * rng.uniform(0.5, 1.0)
    wander = cfg.drift_mps * 2.0  # metres of slow wander on top of the straight drift
    x = cx0 + speed * math.cos(drift_dir) * t + wander * _smooth_noise(rng, t, (0.03, 0.07))
    y = cy0 + speed * math.sin(drift_dir) * t + wander * _smooth_noise(rng, t, (0.04, 0.09))
    alt = cfg.altitude_m + cfg.altitude_wobble_m * _smooth_noise(rng, t, (0.05, 0.13))
    yaw_sign = 1.0 if rng.random() < 0.5 else -1.0
    jit = cfg.jitter_deg
    heading = heading0 + yaw_sign * cfg.yaw_rate_dps * t + jit * _smooth_noise(rng, t, (0.7, 1.9, 3.1))
    # Keep the pitch inside the gimbal range [-90, ...]: jitter pushes up only when at nadir.
    pitch_noise = jit * _smooth_noise(rng, t, (0.9, 2.3, 3.7))
    pitch = pitch0 + (np.abs(pitch_noise) if pitch0 <= -89.999 else pitch_noise)
    roll = jit * _smooth_noise(rng, t, (0.8, 2.1, 4.3))
    heading = (heading + 180.0) % 360.0 - 180.0
    return CameraTrack(intrinsics(cfg), x, y, alt, heading, pitch, roll, cfg.width, cfg.height)
