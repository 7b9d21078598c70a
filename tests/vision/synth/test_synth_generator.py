"""Synthetic scene generator: determinism, self-consistent ground truth, file formats.

Everything runs procedurally (use_shared_data="off") so the tests pass without ../shared, on small frames.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from vision.synth import SCENE_TYPES, SceneConfig, SynthConfigError, build_scene, generate_scene, load_config

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared"

BASE = dict(width=320, height=180, fps=10.0, duration_s=1.0, use_shared_data="off", altitude_m=50.0)
STILL = dict(drift_mps=0.0, jitter_deg=0.0, yaw_rate_dps=0.0, altitude_wobble_m=0.0)


def read_gt(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", ndmin=2)


def read_speeds(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


def test_same_seed_same_truth_and_frames(tmp_path):
    cfg = SceneConfig(scene="highway", seed=7, write_video=False, road_mask_every=0, **BASE)
    a = generate_scene(cfg, tmp_path / "a", progress=False)
    b = generate_scene(cfg, tmp_path / "b", progress=False)
    for rel in ("gt/gt.txt", "gt/speeds.csv", "gt/camera.csv", "video.SRT"):
        assert (a.out_dir / rel).read_bytes() == (b.out_dir / rel).read_bytes(), rel
    assert a.gt_rows > 0
    s1, s2 = build_scene(cfg), build_scene(cfg)
    for i in (0, 1):
        img1, road1, _ = s1.render(i)
        img2, road2, _ = s2.render(i)
        assert np.array_equal(img1, img2) and np.array_equal(road1, road2)
    other = generate_scene(cfg.model_copy(update={"seed": 8}), tmp_path / "c", progress=False)
    assert (other.out_dir / "gt/gt.txt").read_bytes() != (a.out_dir / "gt/gt.txt").read_bytes()


@pytest.fixture(scope="module")
def still_highway(tmp_path_factory):
    """A nadir highway clip from a perfectly still camera, 2 s at 30 fps."""
    cfg = SceneConfig(
        scene="highway",
        seed=3,
        **{**BASE, "fps": 30.0, "duration_s": 2.0, "width": 640, "height": 360},
        **STILL,
        parked_vehicles=0,
        clutter_objects=0,
        write_video=False,
        road_mask_every=0,
    )
    out = tmp_path_factory.mktemp("still")
    res = generate_scene(cfg, out, progress=False)
    return res, read_gt(out / "gt/gt.txt"), read_speeds(out / "gt/speeds.csv")


def test_speeds_match_ground_positions(still_highway):
    """Central differences of the true ground positions give back the true speeds."""
    res, _, sp = still_highway
    fps = res.fps
    errs = []
    for vid in np.unique(sp[:, 1]):
        rows = sp[sp[:, 1] == vid]
        rows = rows[np.argsort(rows[:, 0])]
        for k in range(1, len(rows) - 1):
            if rows[k + 1, 0] - rows[k - 1, 0] != 2:
                continue
            dist = np.hypot(*(rows[k + 1, 3:5] - rows[k - 1, 3:5]))
            measured = dist / (2 / fps) * 3.6
            # constant acceleration within a step: the chord speed is the mean of the end speeds
            expected = (rows[k - 1, 2] + rows[k + 1, 2]) / 2
            errs.append(measured - expected)
    errs = np.abs(np.array(errs))
    assert len(errs) > 50
    assert np.median(errs) < 0.05 and errs.max() < 1.0


def test_speeds_match_boxes_with_true_scale(still_highway):
    """Box-centre motion in pixels times the true metres-per-pixel gives back the true speed (nadir, still camera).

    A box encloses the 3-D vehicle: its edges are ground or roof corners, and the roof, nearer the camera, moves
    alt / (alt - height) times faster in the image. So the measured/true ratio must lie in [1, alt / (alt - h)].
    """
    res, gt, sp = still_highway
    meta = json.loads((res.out_dir / "scene.json").read_text())
    alt = res.config.altitude_m
    height = {int(k): v["height_m"] for k, v in meta["vehicles"].items()}
    speed = {(int(f), int(i)): v for f, i, v, *_ in sp}
    centre = {(int(f), int(i)): (l + w / 2, t + h / 2) for f, i, l, t, w, h, _, _, vis in gt if vis >= 1.0}
    checked = 0
    for (f, i), c in centre.items():
        if (f - 1, i) in centre and (f + 1, i) in centre and speed[(f, i)] > 20:
            d = np.hypot(*(np.subtract(centre[(f + 1, i)], centre[(f - 1, i)])))
            measured = d * res.metres_per_pixel / (2 / res.fps) * 3.6
            ratio = measured / ((speed[(f - 1, i)] + speed[(f + 1, i)]) / 2)
            assert 1 - 0.005 < ratio < alt / (alt - height[i]) + 0.005, (f, i, ratio)
            checked += 1
    assert checked > 30


def test_boxes_enclose_rendered_vehicles(tmp_path):
    """Pixels changed by drawing the vehicles lie inside the ground-truth boxes (no blur, shadows, noise, clutter)."""
    cfg = SceneConfig(
        scene="intersection",
        seed=2,
        **{**BASE, "width": 480, "height": 270},
        **STILL,
        clutter_objects=0,
        motion_blur=False,
        shadows=False,
        noise_sigma=0.0,
        jpeg_quality=None,
        lighting_changes=False,
    )
    scene = build_scene(cfg)
    img, _, boxes = scene.render(0)
    empty, _, _ = scene.renderer.render(0, [])
    changed = np.abs(img.astype(int) - empty.astype(int)).max(axis=2) > 10
    inside = np.zeros_like(changed)
    for b in boxes:
        inside[int(b.top) : int(np.ceil(b.top + b.height)), int(b.left) : int(np.ceil(b.left + b.width))] = True
    assert len(boxes) >= 3 and changed.sum() > 200
    # anti-aliased edges may touch the pixel just outside a box edge, nothing further
    grown = cv2.dilate(inside.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    assert (changed & ~grown).sum() == 0
    for b in boxes:
        if b.visibility == 1.0 and b.width * b.height > 40:
            box = changed[int(b.top) : int(b.top + b.height), int(b.left) : int(b.left + b.width)]
            assert box.mean() > 0.3, "a truth box without a vehicle drawn in it"


def parse_srt(text: str) -> list[dict[str, float]]:
    """Tiny independent reader of the DJI Mavic 3 layout: the bracketed fields of each entry."""
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(re.findall(r"(\w+)\s*:\s*(-?[\d.]+)", block.split("\n", 3)[3]))
        out.append({k: float(v) for k, v in fields.items()})
    return out


def test_srt_parses_back_to_altitude_and_pitch(tmp_path):
    cfg = SceneConfig(
        scene="rural",
        seed=4,
        gimbal_pitch_deg=-60.0,
        write_video=False,
        road_mask_every=0,
        **{**BASE, "altitude_m": 95.0},
    )
    res = generate_scene(cfg, tmp_path, progress=False)
    entries = parse_srt((tmp_path / "video.SRT").read_text())
    cam = np.loadtxt(tmp_path / "gt/camera.csv", delimiter=",", skiprows=1, ndmin=2)
    assert len(entries) == res.frame_count == len(cam)
    for e, row in zip(entries, cam):
        assert e["rel_alt"] == pytest.approx(row[4], abs=1e-3)
        assert e["gb_pitch"] == pytest.approx(row[6], abs=0.05)
        assert e["gb_yaw"] == pytest.approx((row[5] + 180) % 360 - 180, abs=0.05)
        assert e["abs_alt"] == pytest.approx(row[4] + cfg.ground_elevation_m, abs=1e-3)
    assert entries[0]["focal_len"] == pytest.approx(24.6, abs=0.1)  # Mavic 3: 12.29 mm on 4/3" = 24 mm class
    try:
        from vision.telemetry.loader import load_flight_log
    except ImportError:
        return
    log = load_flight_log(tmp_path / "video.SRT")
    assert len(log.samples) == res.frame_count
    assert log.samples[5].rel_alt_m == pytest.approx(cam[5, 4], abs=1e-3)
    assert log.samples[5].gimbal_pitch_deg == pytest.approx(cam[5, 6], abs=0.05)


def test_video_reads_back_and_matches_frames(tmp_path):
    cfg = SceneConfig(scene="highway", seed=1, **BASE)
    res = generate_scene(cfg, tmp_path, progress=False)
    cap = cv2.VideoCapture(str(tmp_path / "video.mp4"))
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f)
    cap.release()
    assert len(frames) == res.frame_count
    rendered, road, _ = build_scene(cfg).render(0)
    assert frames[0].shape == rendered.shape
    psnr = cv2.PSNR(frames[0], rendered)
    assert psnr > 28
    masks = sorted((tmp_path / "road_mask").glob("*.png"))
    assert len(masks) == res.frame_count and masks[0].name == "000001.png"
    assert np.array_equal(cv2.imread(str(masks[0]), cv2.IMREAD_GRAYSCALE), road)
    meta = json.loads((tmp_path / "scene.json").read_text())
    assert meta["seed"] == 1 and meta["metres_per_pixel"] == pytest.approx(res.metres_per_pixel)
    ini = (tmp_path / "seqinfo.ini").read_text()
    assert f"seqLength={res.frame_count}" in ini and "imWidth=320" in ini


@pytest.mark.parametrize("scene", SCENE_TYPES)
def test_every_scene_type_renders_vehicles(scene):
    cfg = SceneConfig(scene=scene, seed=0, **{**BASE, "altitude_m": 70.0, "duration_s": 0.3})
    sc = build_scene(cfg)
    img, road, boxes = sc.render(0)
    assert img.shape == (180, 320, 3) and road.dtype == np.uint8
    assert 0.03 < (road > 0).mean() < 0.9, "the road should be in view"
    assert boxes, "no vehicle in view"
    assert all(0 <= b.left and b.left + b.width <= 320 + 1e-6 and 0 < b.visibility <= 1 for b in boxes)


def test_yolo_export(tmp_path):
    cfg = SceneConfig(scene="intersection", seed=5, yolo_every=4, write_video=False, **BASE)
    generate_scene(cfg, tmp_path, progress=False)
    labels = sorted((tmp_path / "yolo/labels").glob("*.txt"))
    images = sorted((tmp_path / "yolo/images").glob("*.jpg"))
    assert len(labels) == len(images) == 3  # frames 1, 5, 9 of 10
    rows = np.loadtxt(labels[0], ndmin=2)
    assert len(rows) and set(rows[:, 0].astype(int)) <= {0, 1, 2, 3}
    assert ((rows[:, 1:] > 0) & (rows[:, 1:] <= 1)).all()
    assert "names:" in (tmp_path / "yolo/data.yaml").read_text()


def test_bad_config_is_one_clear_error(tmp_path):
    with pytest.raises(SynthConfigError, match="width"):
        load_config(None, width=641)
    bad = tmp_path / "scene.json"
    bad.write_text("{not json")
    with pytest.raises(SynthConfigError, match=str(bad)):
        load_config(bad)
    bad.write_text(json.dumps({"scene": "moon"}))
    with pytest.raises(SynthConfigError, match="scene"):
        load_config(bad)


@pytest.mark.shared
@pytest.mark.skipif(not (SHARED / "data" / "road_seg" / "epfl_aerial").is_dir(), reason="../shared data not present")
def test_real_imagery_used_when_shared_is_there():
    cfg = SceneConfig(
        scene="highway", seed=0, **{**BASE, "use_shared_data": "on", "duration_s": 0.2}, shared_dir=str(SHARED)
    )
    sc = build_scene(cfg)
    assert "epfl_aerial" in sc.assets_source and "madison_drone_view" in sc.assets_source
    img, _, boxes = sc.render(0)
    assert boxes and img.std() > 10
