"""Vehicle sides in oblique renders: the body's colour with glass and wheels, not a flat dark patch.

Procedural (use_shared_data="off"): runs without ../shared.
"""

from __future__ import annotations

import cv2
import numpy as np

from vision.synth import SceneConfig, build_scene
from vision.synth.render import Placed, cuboid
from vision.synth.sides import GLASS_BGR, long_side, side_textures
from vision.synth.sprites import PX_PER_M, sprite_for
from vision.synth.vehicles import VehicleSpec

RED = (40, 40, 200)  # BGR


def car(vid: int = 1, cls: str = "car", length: float = 4.5) -> VehicleSpec:
    return VehicleSpec(vid, cls, length, 1.8, 1.5, RED, "red", look=5)


def test_a_cars_side_has_glass_over_its_cabin_and_wheels_at_its_foot():
    spec = car()
    side = long_side(spec, np.array(RED, np.float64), np.random.default_rng(0))
    h, w = side.shape[:2]
    assert (h, w) == (round(1.5 * PX_PER_M), round(4.5 * PX_PER_M))
    glass = side[int(0.2 * h), int(0.4 * w)]
    body = side[int(0.6 * h), int(0.4 * w)]
    assert np.allclose(glass, GLASS_BGR)
    assert body[2] > 2 * body[0] and body[2] > 120, "the side keeps the roof's paint"
    assert side[int(0.2 * h), int(0.05 * w)][2] > 100, "no glass over the boot"
    wheel, between = side[h - 2, int(0.14 * w)], side[h - 2, int(0.5 * w)]
    assert wheel.max() < 40 < between[2]


def test_the_right_side_mirrors_the_left_and_the_ends_have_their_lamps():
    spec = car()
    left, front, right, rear = side_textures(spec, sprite_for(spec, []))
    assert left.shape == right.shape and front.shape[1] == round(1.8 * PX_PER_M)
    for t in (left, front, right, rear):
        assert t.dtype == np.float32 and t.shape[2] == 4 and np.all(t[..., 3] == 1.0)
    # noise differs; the layout is mirrored: glass over the cabin, the wheels at both ends
    assert np.abs(cv2.blur(left[..., :3], (9, 9)) - cv2.blur(right[:, ::-1, :3], (9, 9))).mean() < 6
    lamp_row = int(0.6 * front.shape[0])
    assert front[lamp_row, 3:8, :3].mean() > 180, "white headlamps"
    assert rear[lamp_row, 3:8, 2].mean() > 2 * rear[lamp_row, 3:8, 0].mean(), "red tail lamps"


def test_an_oblique_render_draws_the_visible_side_in_the_body_colour_with_its_windows():
    cfg = SceneConfig(
        scene="intersection",
        seed=2,
        width=480,
        height=270,
        fps=10.0,
        duration_s=1.0,
        altitude_m=30.0,
        gimbal_pitch_deg=-55.0,
        use_shared_data="off",
        drift_mps=0.0,
        jitter_deg=0.0,
        yaw_rate_dps=0.0,
        altitude_wobble_m=0.0,
        clutter_objects=0,
        motion_blur=False,
        shadows=False,
        noise_sigma=0.0,
        jpeg_quality=None,
        lighting_changes=False,
    )
    scene = build_scene(cfg)
    r = scene.renderer
    x, y = r.cam.image_to_ground(0, np.array([[240.0, 135.0]]))[0]
    # heading across the view: its long side faces the camera
    placed = Placed(car(), float(x), float(y), heading=0.0, speed=0.0)
    up = r.cam.image_to_ground(0, np.array([[240.0, 100.0]]))[0] - np.array([x, y])
    placed.heading = float(np.arctan2(up[1], up[0]) + np.pi / 2)
    img, _, boxes = r.render(0, [placed])
    empty, _, _ = r.render(0, [])
    changed = np.abs(img.astype(int) - empty.astype(int)).max(axis=2) > 10
    assert len(boxes) == 1
    P = r.cam.projection(0)
    roof = cuboid(placed)[4:8]
    h = roof @ P[:, :3].T + P[:, 3]
    roof_uv = h[:, :2] / h[:, 2:3]
    roof_mask = np.zeros(changed.shape, np.uint8)
    cv2.fillConvexPoly(roof_mask, np.round(roof_uv).astype(np.int32), 1)
    roof_mask = cv2.dilate(roof_mask, np.ones((3, 3), np.uint8)).astype(bool)
    side = changed & ~roof_mask
    assert side.sum() > 0.2 * changed.sum(), "the side takes a good part of the vehicle's image"
    px = img[side].astype(float)
    reddish = (px[:, 2] > 1.5 * px[:, 0]) & (px[:, 2] > 90)
    dark = px.max(axis=1) < 70
    assert reddish.mean() > 0.3, "the side is painted like the roof"
    assert dark.mean() > 0.1, "windows and wheels on it"
