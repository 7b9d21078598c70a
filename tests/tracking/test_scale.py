import json

import numpy as np
import pytest

from tests.conftest import shared_path
from tracking.config import CalibrationConfig, SpeedConfig
from tracking.scale import GroundScale, load_calibration
from tracking.types import ScaleSource
from vision.types import CameraPose


def test_preference_telemetry_then_calibration_then_size_prior():
    cal = CalibrationConfig(metres_per_pixel=0.2)
    gs = GroundScale(cal, SpeedConfig(), 1280, 720)
    pose = CameraPose(t=0, altitude_m=60, gimbal_pitch_deg=-90, lat=50.0, lon=36.0)
    assert gs.frame(pose, None).source == ScaleSource.TELEMETRY
    assert gs.frame(None, None).source == ScaleSource.CALIBRATION
    gs = GroundScale(CalibrationConfig(), SpeedConfig(car_length_m=4.5), 1280, 720)
    assert gs.frame(None, None) is None  # no vehicle measured yet: no scale (tests/tracking/test_vehicle_size.py)


def test_telemetry_frame_gives_lonlat_around_the_drone():
    gs = GroundScale(CalibrationConfig(), SpeedConfig(), 1000, 1000)
    g = gs.frame(CameraPose(t=0, altitude_m=100, gimbal_pitch_deg=-90, heading_deg=0, lat=50.0, lon=36.0), None)
    ll = g.to_lonlat(g.to_ground(np.array([[500, 500], [500, 0]])))
    assert ll[0] == pytest.approx([36.0, 50.0])
    assert ll[1][1] > 50.0  # image top is north


def test_four_point_calibration_follows_ego_motion():
    cal = CalibrationConfig(
        image_points=[(0, 0), (100, 0), (100, 100), (0, 100)], ground_points_m=[(0, 0), (10, 0), (10, -10), (0, -10)]
    )
    gs = GroundScale(cal, SpeedConfig(), 100, 100)
    g0 = gs.frame(None, np.eye(3))
    assert g0.to_ground(np.array([[50, 50]]))[0] == pytest.approx([5, -5])
    # the camera moved so that first-frame pixel (50, 50) is now at (40, 50): H_cur_to_first shifts +10 px
    H_cur_to_first = np.array([[1, 0, 10.0], [0, 1, 0], [0, 0, 1]])
    assert gs.frame(None, H_cur_to_first).to_ground(np.array([[40, 50]]))[0] == pytest.approx([5, -5])


def test_baseline_scale_is_constant():
    gs = GroundScale(CalibrationConfig(), SpeedConfig(), 1000, 1000, constant=True)
    g1 = gs.frame(CameraPose(t=0, altitude_m=100, gimbal_pitch_deg=-90), None)
    g2 = gs.frame(CameraPose(t=1, altitude_m=200, gimbal_pitch_deg=-90), None)
    assert g1.metres_per_pixel(500, 500) == g2.metres_per_pixel(0, 0)


def test_load_calibration_forms(tmp_path):
    assert load_calibration("0.43").metres_per_pixel == 0.43
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"coordinates": [[36.30, 49.967], [36.306, 49.974], [36.312, 49.973], [36.309, 49.966]]}))
    assert len(load_calibration(str(p)).lonlat_points) == 4
    p.write_text("{not json")
    with pytest.raises(ValueError, match="c.json: calibration file is not valid JSON"):
        load_calibration(str(p))
    p.write_text(json.dumps({"ground_points_m": [[0, 0], [1, 1]]}))
    with pytest.raises(ValueError, match="at least 4 points"):
        load_calibration(str(p))
    with pytest.raises(ValueError, match="neither a number"):
        load_calibration(str(tmp_path / "missing.json"))


def test_georeferenced_corners_of_the_interchange_give_about_043_m_per_px():
    path = shared_path("data", "real_video", "nadir_interchange", "georef_corners.json")
    gs = GroundScale(load_calibration(str(path)), SpeedConfig(), 1920, 1080)
    g = gs.frame(None, np.eye(3))
    assert g.metres_per_pixel(960, 540) == pytest.approx(0.43, abs=0.03)
    lon, lat = g.to_lonlat(g.to_ground(np.array([[0.0, 0.0]])))[0]
    assert lon == pytest.approx(36.3034739, abs=1e-6) and lat == pytest.approx(49.9671879, abs=1e-6)
