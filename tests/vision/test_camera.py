import math

import numpy as np
import pytest

from vision.camera import (
    CAMERA_PRESETS,
    apply_homography,
    camera_preset,
    enu_to_lonlat,
    image_to_ground_homography,
    local_scale,
    local_scales,
    lonlat_to_enu,
)
from vision.types import CameraPose


def test_nadir_scale_matches_pinhole_formula():
    cam = CAMERA_PRESETS["dji_mavic3"]
    pose = CameraPose(t=0, altitude_m=100.0, gimbal_pitch_deg=-90, heading_deg=0, camera=cam)
    G = image_to_ground_homography(pose, 1920, 1080)
    # ground sample distance = altitude * sensor width / (focal * image width)
    gsd = 100.0 * cam.sensor_width_mm / (cam.focal_length_mm * 1920)
    assert local_scale(G, 960, 540) == pytest.approx(gsd, rel=1e-6)
    centre, right, top = apply_homography(G, np.array([[960, 540], [1920, 540], [960, 0]]))
    assert np.allclose(centre, 0, atol=1e-6)
    assert right[0] > 0 and abs(right[1]) < 1e-6  # heading north: image right is east
    assert top[1] > 0 and abs(top[0]) < 1e-6  # image top is north


def test_heading_rotates_ground_axes():
    pose = CameraPose(t=0, altitude_m=50.0, gimbal_pitch_deg=-90, heading_deg=90)
    G = image_to_ground_homography(pose, 1000, 1000)
    top = apply_homography(G, np.array([[500, 0]]))[0]
    assert top[0] > 0 and abs(top[1]) < 1e-6  # facing east: image top is east


def test_oblique_centre_ray_hits_ground_at_expected_distance():
    pose = CameraPose(t=0, altitude_m=80.0, gimbal_pitch_deg=-30, heading_deg=0)
    G = image_to_ground_homography(pose, 1280, 720)
    c = apply_homography(G, np.array([[640, 360]]))[0]
    assert c[1] == pytest.approx(80.0 / math.tan(math.radians(30)), rel=1e-6)
    # farther up the image = farther away = more metres per pixel
    assert local_scale(G, 640, 200) > local_scale(G, 640, 600)


def test_no_altitude_or_horizon_gives_none():
    assert image_to_ground_homography(CameraPose(t=0), 100, 100) is None
    assert image_to_ground_homography(CameraPose(t=0, altitude_m=50, gimbal_pitch_deg=0), 100, 100) is None


def test_lonlat_roundtrip():
    e, n = lonlat_to_enu(np.array([36.31]), np.array([49.97]), 36.30, 49.96)
    lon, lat = enu_to_lonlat(e, n, 36.30, 49.96)
    assert lon[0] == pytest.approx(36.31, abs=1e-9) and lat[0] == pytest.approx(49.97, abs=1e-9)
    assert n[0] == pytest.approx(1113.2, rel=1e-3)  # 0.01 deg of latitude ~ 1.11 km


def test_unknown_preset_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown camera preset"):
        camera_preset("nikon d1")
    assert camera_preset("DJI Mavic3").name == "dji_mavic3"


def test_local_scales_is_local_scale_at_each_point():
    rng = np.random.default_rng(3)
    H = np.array([[0.05, 0.001, -3.0], [0.002, -0.06, 40.0], [1e-5, 2e-4, 1.0]])  # an oblique image -> ground map
    pts = rng.uniform(0, 1900, (50, 2))
    one_by_one = np.array([local_scale(H, x, y) for x, y in pts])
    assert np.allclose(local_scales(H, pts), one_by_one, rtol=1e-12, atol=0)
    assert local_scales(H, np.zeros((0, 2))).shape == (0,)
