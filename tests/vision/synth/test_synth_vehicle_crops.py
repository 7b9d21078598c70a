"""Trucks, buses and vans drawn from real drone crops (vision/synth/assets.py, sprites.py), and the drawn fallback.

The tests marked ``shared`` read ../shared (or $AIRPATROL_SHARED) and skip when it is absent; the others build
their own crops.
"""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from vision.synth import SceneConfig, build_scene
from vision.synth.assets import HEAVY_ASPECT, HEAVY_CLASSES, _straighten, load_assets
from vision.synth.sprites import PX_PER_M, cab_at_right, draw_bus, draw_car, draw_truck, sprite_for
from vision.synth.vehicles import VehicleSpec

SHARED = Path(os.environ.get("AIRPATROL_SHARED") or Path(__file__).resolve().parents[3] / ".." / "shared")
HAVE_HEAVY = (SHARED / "data" / "detection" / "aerial_cars_drone" / "labels").is_dir()
NO_SHARED = "../shared/data/detection/aerial_cars_drone not present (set AIRPATROL_SHARED to the shared data)"

DIMS = {"car": (4.4, 1.8), "van": (5.4, 2.0), "truck": (8.0, 2.5), "bus": (12.0, 2.55)}
CLASS_BGR = {"truck": (200, 30, 30), "bus": (30, 200, 30), "van": (30, 30, 200)}


def spec(cls: str, look: int = 5, length: float | None = None) -> VehicleSpec:
    L, W = DIMS[cls]
    return VehicleSpec(1, cls, length or L, W, 3.0, (120, 120, 120), "grey", look)


def mean_bgr(sprite: np.ndarray) -> np.ndarray:
    a = sprite[..., 3]
    m = a > 0.9
    return sprite[..., :3][m].mean(axis=0) / a[m].mean()


def solid_crops() -> dict[str, list[np.ndarray]]:
    """One plain crop per class, in a colour of its own, shaped like that class (length/width)."""
    out = {}
    for cls, bgr in CLASS_BGR.items():
        L, W = DIMS[cls]
        img = np.empty((int(W * 20), int(L * 20), 3), np.uint8)
        img[:] = bgr
        out[cls] = [img]
    return out


@pytest.mark.parametrize("cls", HEAVY_CLASSES)
def test_heavy_vehicle_uses_a_crop_of_its_class_at_its_size(cls):
    sp = sprite_for(spec(cls), [], solid_crops())
    L, W = DIMS[cls]
    assert sp.shape[:2] == (round(W * PX_PER_M), round(L * PX_PER_M))  # scaled to the vehicle's length x width
    assert np.abs(mean_bgr(sp) - CLASS_BGR[cls]).max() < 12  # the crop of its own class, not another's


def test_fallback_draws_when_no_crop_fits_or_none_given():
    crops = solid_crops()
    look = spec("bus").look
    for vehicle_crops in (None, {}, {"truck": crops["truck"]}):
        assert np.array_equal(sprite_for(spec("bus"), [], vehicle_crops), draw_bus(spec("bus"), rng(look)))
    semi = spec("truck", length=16.0)
    assert np.array_equal(sprite_for(semi, [], {"bus": crops["bus"]}), draw_truck(semi, rng(look)))
    van = spec("van")
    assert np.array_equal(sprite_for(van, [], {"bus": crops["bus"]}), draw_car(van, rng(look), van=True))
    # cars do not change with the heavy-vehicle crops
    assert np.array_equal(sprite_for(spec("car"), [], crops), sprite_for(spec("car"), []))


def test_semi_trailer_is_a_truck_crop_with_its_load_stretched():
    """16 m is twice the ratio of the 8 m truck crop: its cab end keeps its scale, the load is stretched."""
    crop = np.full((50, 160, 3), 200, np.uint8)  # 8 m x 2.5 m at 20 px/m: a light load ...
    crop[:, 120:] = (40, 40, 160)  # ... and a red 2 m cab at its right end
    crop[10:40, 150:154] = 10  # its windscreen: the darkest band
    semi = spec("truck", length=16.0)
    sp = sprite_for(semi, [], {"truck": [crop]})
    assert sp.shape[:2] == (round(2.5 * PX_PER_M), round(16.0 * PX_PER_M))
    rgb = sp[..., :3] / np.maximum(sp[..., 3:], 1e-3)
    red = np.flatnonzero(rgb[sp.shape[0] // 2, :, 2] - rgb[sp.shape[0] // 2, :, 0] > 60)
    cab_m = (red.max() - red.min() + 1) / PX_PER_M
    assert 1.5 < cab_m < 3.0 and red.max() > sp.shape[1] - 0.1 * PX_PER_M * 16  # cab ~2 m long, at the front
    assert cab_at_right(crop) and not cab_at_right(crop[:, ::-1])
    # the cab drawn at the left of the crop ends up at the front (right) all the same
    assert np.array_equal(sprite_for(semi, [], {"truck": [crop[:, ::-1].copy()]}), sp)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_turned_vehicle_is_straightened_from_its_axis_aligned_box():
    r = np.random.default_rng(0)
    img = np.clip(r.normal(90, 6, (400, 500, 3)), 0, 255).astype(np.uint8)
    body = ((250, 200), (200, 50), 15.0)  # centre, (length, width), degrees (y down)
    cv2.fillPoly(img, [cv2.boxPoints(body).astype(np.int32)], (230, 230, 230))
    x, y, w, h = cv2.boundingRect(cv2.boxPoints(body).astype(np.float32))
    crop = _straighten(img, x, y, x + w, y + h)
    assert crop is not None
    assert abs(crop.shape[1] - 200) <= 14 and abs(crop.shape[0] - 50) <= 8, crop.shape
    assert crop[5:-5, 5:-5].mean() > 200  # the body fills it: no background wedges left
    # turned 40 degrees: the box is mostly background -> not used
    body = ((250, 200), (200, 50), 40.0)
    img2 = np.full_like(img, 90)
    cv2.fillPoly(img2, [cv2.boxPoints(body).astype(np.int32)], (230, 230, 230))
    x, y, w, h = cv2.boundingRect(cv2.boxPoints(body).astype(np.float32))
    assert _straighten(img2, x, y, x + w, y + h) is None


def test_no_shared_data_means_drawn_vehicles(tmp_path):
    assets = load_assets(SceneConfig(shared_dir=str(tmp_path)))
    assert assets.vehicle_crops == {} and assets.source == "procedural"


@pytest.mark.shared
@pytest.mark.skipif(not HAVE_HEAVY, reason=NO_SHARED)
def test_shared_crops_per_class_and_used_for_their_class():
    assets = load_assets(SceneConfig(use_shared_data="on", shared_dir=str(SHARED)))
    assert "aerial_cars_drone" in assets.source
    pool = []
    for cls in HEAVY_CLASSES:
        crops = assets.vehicle_crops.get(cls, [])
        assert crops, f"no {cls} crops"
        lo, hi = HEAVY_ASPECT[cls]
        for c in crops:
            assert lo <= c.shape[1] / c.shape[0] <= hi  # long axis horizontal, a plausible outline
        pool += [(cls, c) for c in crops]
    for cls in HEAVY_CLASSES:
        sp = sprite_for(spec(cls), [], assets.vehicle_crops)
        got = cv2.resize((sp[..., :3] / np.maximum(sp[..., 3:], 1e-3)).astype(np.float32), (48, 12))

        def distance(c: np.ndarray) -> float:
            small = cv2.resize(c, (48, 12), interpolation=cv2.INTER_AREA).astype(np.float32)
            flips = (small, small[:, ::-1], small[::-1], small[::-1, ::-1])
            return min(float(np.abs(f - got)[2:-2, 2:-2].mean()) for f in flips)

        best = min(pool, key=lambda item: distance(item[1]))
        assert best[0] == cls, f"a {cls} looks most like a {best[0]} crop"


@pytest.mark.shared
@pytest.mark.skipif(not HAVE_HEAVY, reason=NO_SHARED)
def test_same_seed_same_frames_with_real_crops():
    cfg = SceneConfig(
        scene="highway",
        seed=11,
        width=480,
        height=270,
        fps=10.0,
        duration_s=0.3,
        altitude_m=60.0,
        traffic_density=1.5,
        use_shared_data="on",
        shared_dir=str(SHARED),
        write_video=False,
    )
    a, b = build_scene(cfg), build_scene(cfg)
    heavy = [s for s in a.specs.values() if s.cls in HEAVY_CLASSES and s.kind != "clutter"]
    assert heavy, "the scene should have trucks, buses or vans"
    for i in (0, 2):
        img_a, _, _ = a.render(i)
        img_b, _, _ = b.render(i)
        assert np.array_equal(img_a, img_b)
    shown = [(a.renderer.sprites[s.vid][0], s) for s in heavy if s.vid in a.renderer.sprites]
    real = [s for sp, s in shown if not np.array_equal(sp, sprite_for(s, []))]
    assert real, "no truck, bus or van in view was drawn from a real crop"
