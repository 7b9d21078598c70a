"""Camera presets and the flat-ground geometry that turns pixels into metres.

The ground is taken as a plane (roads seen from a drone are locally flat). With the camera's height above it,
its intrinsics and its orientation (gimbal pitch, heading) the image <-> ground mapping is a homography.
"""

from __future__ import annotations

import math

import numpy as np

from vision.types import CameraModel, CameraPose

# Sensor sizes and real focal lengths of common drone cameras (manufacturer data sheets).
CAMERA_PRESETS: dict[str, CameraModel] = {
    m.name: m
    for m in (
        CameraModel("dji_mavic3", 17.3, 13.0, 12.29),  # Hasselblad L2D-20c, 24 mm equiv.
        CameraModel("dji_mavic2_pro", 13.2, 8.8, 10.26),  # Hasselblad L1D-20c, 28 mm equiv.
        CameraModel("dji_air2s", 13.2, 8.8, 8.38),  # 1", 22 mm equiv.
        CameraModel("dji_air2", 6.4, 4.8, 4.5),  # 1/2", 24 mm equiv.
        CameraModel("dji_mini", 6.17, 4.55, 4.49),  # Mini / Mini 2 / Mini SE, 24 mm equiv.
        CameraModel("dji_mini3_pro", 9.7, 7.3, 6.72),  # 1/1.3", 24 mm equiv.
        CameraModel("dji_mavic_pro", 6.17, 4.55, 4.73),  # 26 mm equiv.
        CameraModel("dji_mavic_air", 6.17, 4.55, 4.5),  # 24 mm equiv.
        CameraModel("dji_phantom4_pro", 13.2, 8.8, 8.8),  # 24 mm equiv.
        CameraModel("dji_m300_h20_wide", 6.17, 4.55, 4.5),  # H20/H20T wide camera, 24 mm equiv.
        CameraModel("parrot_bebop2", 6.17, 4.55, 1.8),  # fisheye, rectified to ~ 80 deg HFOV by the drone
    )
}
DEFAULT_CAMERA = CAMERA_PRESETS["dji_mavic3"]

# A "35 mm-equivalent" focal length is defined on the full-frame diagonal (43.27 mm). Drone cameras are mostly 4:3,
# so the equivalent sensor is 34.6 x 26.0 mm; video crops (16:9) keep the sensor's full width.
FULL_FRAME_DIAGONAL_MM = 43.27
EQUIV_SENSOR_WIDTH_MM = FULL_FRAME_DIAGONAL_MM * 0.8


def camera_preset(name: str) -> CameraModel:
    key = name.strip().lower().replace(" ", "_").replace("-", "_")
    if key in CAMERA_PRESETS:
        return CAMERA_PRESETS[key]
    raise ValueError(f"unknown camera preset {name!r}; known: {', '.join(sorted(CAMERA_PRESETS))}")


def camera_from_focal_equiv(focal_equiv_mm: float, name: str = "from_srt") -> CameraModel:
    """A camera from a 35 mm-equivalent focal length (what DJI writes in its SRT files), assuming a 4:3 sensor."""
    return CameraModel(name, EQUIV_SENSOR_WIDTH_MM, EQUIV_SENSOR_WIDTH_MM * 0.75, float(focal_equiv_mm))


def camera_for_pose(pose: CameraPose) -> CameraModel:
    if pose.camera is not None:
        return pose.camera
    if pose.focal_length_mm:
        return camera_from_focal_equiv(pose.focal_length_mm)
    return DEFAULT_CAMERA


def rotation_world_to_camera(heading_deg: float, pitch_deg: float, roll_deg: float = 0.0) -> np.ndarray:
    """Rows are the camera's x (image right), y (image down), z (optical axis) in world ENU coordinates."""
    psi, phi = math.radians(heading_deg), math.radians(pitch_deg)
    forward = np.array([math.sin(psi), math.cos(psi), 0.0])
    right = np.array([math.cos(psi), -math.sin(psi), 0.0])
    z = math.cos(phi) * forward + math.sin(phi) * np.array([0.0, 0.0, 1.0])
    x = right
    y = np.cross(z, x)
    if roll_deg:
        r = math.radians(roll_deg)
        x, y = math.cos(r) * x + math.sin(r) * y, -math.sin(r) * x + math.cos(r) * y
    return np.stack([x, y, z])


def ground_to_image_homography(
    K: np.ndarray, altitude_m: float, heading_deg: float = 0.0, pitch_deg: float = -90.0, roll_deg: float = 0.0
) -> np.ndarray:
    """Homography from ground (east, north) metres, origin below the camera, to image pixels."""
    R = rotation_world_to_camera(heading_deg, pitch_deg, roll_deg)
    C = np.array([0.0, 0.0, altitude_m])
    H = K @ np.column_stack([R[:, 0], R[:, 1], -R @ C])
    return H / H[2, 2]


def image_to_ground_homography(pose: CameraPose, width: int, height: int) -> np.ndarray | None:
    """Pixel -> ground (east, north) metres below the camera, or None when the pose lacks altitude."""
    if pose.altitude_m is None or pose.altitude_m <= 0.5:
        return None
    K = camera_for_pose(pose).intrinsics(width, height)
    pitch = -90.0 if pose.gimbal_pitch_deg is None else float(pose.gimbal_pitch_deg)
    if pitch > -5.0:  # near the horizon the ground mapping is meaningless
        return None
    H = ground_to_image_homography(K, pose.altitude_m, pose.heading_deg or 0.0, pitch, pose.gimbal_roll_deg or 0.0)
    return np.linalg.inv(H)


def apply_homography(H: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Map Nx2 points through a 3x3 homography."""
    pts = np.asarray(pts, np.float64).reshape(-1, 2)
    h = np.column_stack([pts, np.ones(len(pts))]) @ H.T
    return h[:, :2] / h[:, 2:3]


def local_scale(H_img_to_ground: np.ndarray, x: float, y: float) -> float:
    """Metres per pixel at image point (x, y): mean length of the mapped unit steps."""
    return float(local_scales(H_img_to_ground, np.array([[x, y]]))[0])


def local_scales(H_img_to_ground: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """``local_scale`` at each of N points (Nx2), in one pass."""
    pts = np.asarray(pts, np.float64).reshape(-1, 2)
    p0 = apply_homography(H_img_to_ground, pts)
    dx = apply_homography(H_img_to_ground, pts + (1.0, 0.0)) - p0
    dy = apply_homography(H_img_to_ground, pts + (0.0, 1.0)) - p0
    return (np.hypot(dx[:, 0], dx[:, 1]) + np.hypot(dy[:, 0], dy[:, 1])) / 2


EARTH_RADIUS_M = 6378137.0


def enu_to_lonlat(east: np.ndarray, north: np.ndarray, lon0: float, lat0: float) -> tuple[np.ndarray, np.ndarray]:
    """Local east/north metres around (lon0, lat0) to WGS84 (equirectangular: exact enough within a few km)."""
    lat = lat0 + np.degrees(np.asarray(north) / EARTH_RADIUS_M)
    lon = lon0 + np.degrees(np.asarray(east) / (EARTH_RADIUS_M * math.cos(math.radians(lat0))))
    return lon, lat


def lonlat_to_enu(lon: np.ndarray, lat: np.ndarray, lon0: float, lat0: float) -> tuple[np.ndarray, np.ndarray]:
    east = np.radians(np.asarray(lon) - lon0) * EARTH_RADIUS_M * math.cos(math.radians(lat0))
    north = np.radians(np.asarray(lat) - lat0) * EARTH_RADIUS_M
    return east, north
