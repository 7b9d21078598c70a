"""Training plumbing on a tiny synthetic set, the hand-made drone labels, and (with ../shared) the shipped weights' IoU."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from vision.road.unet import DEFAULT_WEIGHTS, load_checkpoint
from vision.training.road.data import epfl_split, load_drone, load_tiles
from vision.training.road.labels import load_labelled, load_labels, rasterise
from vision.training.road.training import evaluate, shared_root, train_road

SHARED = shared_root()
EPFL = SHARED / "data" / "road_seg" / "epfl_aerial"


def make_tiles(folder: Path, n: int = 5, size: int = 96) -> None:
    """Grey 'asphalt' bands on green: a trivially learnable road set."""
    rng = np.random.default_rng(0)
    (folder / "images").mkdir(parents=True)
    (folder / "masks").mkdir()
    for i in range(n):
        img = np.full((size, size, 3), (40, 140, 60), np.uint8)
        mask = np.zeros((size, size), np.uint8)
        y = int(rng.integers(20, size - 20))
        mask[y - 8 : y + 8] = 255
        img[mask > 0] = (90, 90, 90)
        cv2.imwrite(str(folder / "images" / f"t{i}.png"), img)
        cv2.imwrite(str(folder / "masks" / f"t{i}.png"), mask)


def test_train_road_writes_a_loadable_checkpoint_with_metrics(tmp_path: Path):
    make_tiles(tmp_path / "tiles")
    out = tmp_path / "road.pt"
    meta = train_road(
        out, [tmp_path / "tiles"], labels=None, epochs=1, steps_per_epoch=2, batch_size=2, crop=64, width=4
    )
    model, long_side, saved = load_checkpoint(out)
    assert long_side == 512 and set(saved["val_iou"]) == {"epfl"} and saved["train_counts"] == {"epfl": 4}
    assert 0.0 <= meta["val_iou"]["epfl"] <= 1.0


def test_synth_scene_folder_gives_frames_paired_with_their_masks(tmp_path: Path):
    from vision.training.road.data import load_extra

    scene = tmp_path / "scene"
    (scene / "road_mask").mkdir(parents=True)
    writer = cv2.VideoWriter(str(scene / "video.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), 10, (64, 48))
    for i in range(6):  # frame i shows a bright band at row 5 + 5*i; its mask is road_mask/{i+1:06d}.png
        img = np.zeros((48, 64, 3), np.uint8)
        img[5 + 5 * i : 10 + 5 * i] = 255
        writer.write(img)
        mask = np.zeros((48, 64), np.uint8)
        mask[5 + 5 * i : 10 + 5 * i] = 255
        cv2.imwrite(str(scene / "road_mask" / f"{i + 1:06d}.png"), mask)
    writer.release()
    samples = load_extra(scene, 512, frames_per_video=3)
    assert len(samples) == 3
    for s in samples:
        bright = s.image.mean(axis=(1, 2)) > 128
        assert np.array_equal(bright, s.road.any(axis=1)), s.id


def test_training_folder_without_masks_is_a_clear_error(tmp_path: Path):
    (tmp_path / "images").mkdir()
    with pytest.raises(ValueError, match="masks"):
        train_road(tmp_path / "x.pt", [tmp_path], labels=None, epochs=1, steps_per_epoch=1)


def test_drone_labels_are_well_formed():
    entries = load_labels()
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids))
    assert {e["split"] for e in entries} == {"train", "val"}
    assert all(e["view"] in ("nadir", "oblique") for e in entries)
    for e in entries:
        road, ignore = rasterise(e, (1080, 1920))
        assert road.any(), e["id"]


@pytest.mark.shared
@pytest.mark.skipif(not (SHARED / "data").is_dir(), reason=f"shared data not found at {SHARED}")
def test_every_labelled_frame_loads_from_shared():
    for e in load_labels():
        image, road, ignore = load_labelled(e, SHARED / "data")
        assert image.shape[:2] == road.shape == ignore.shape
        assert 0.03 < (road > 0).mean() < 0.9, e["id"]


# Shipped weights measured 0.436 (EPFL held-out) and 0.724 (held-out drone frames, pooled); thresholds leave margin
# for other CPUs/BLAS libraries and small retraining differences, while an untrained or broken model scores about
# the all-road baseline (0.22 EPFL, 0.41 drone).
MIN_EPFL_IOU = 0.35
MIN_DRONE_IOU = 0.6


@pytest.mark.shared
@pytest.mark.skipif(not EPFL.is_dir(), reason=f"EPFL road tiles not found at {EPFL}")
@pytest.mark.skipif(not DEFAULT_WEIGHTS.is_file(), reason="shipped road weights not built yet")
def test_shipped_weights_reach_minimum_iou_on_held_out_epfl_tiles():
    model, long_side, _ = load_checkpoint()
    _, val = epfl_split(EPFL)
    iou = evaluate(model, load_tiles(val, "epfl", long_side), long_side)["epfl"]
    assert iou >= MIN_EPFL_IOU, f"held-out EPFL IoU {iou:.3f}"


@pytest.mark.shared
@pytest.mark.skipif(not (SHARED / "data").is_dir(), reason=f"shared data not found at {SHARED}")
@pytest.mark.skipif(not DEFAULT_WEIGHTS.is_file(), reason="shipped road weights not built yet")
def test_shipped_weights_reach_minimum_iou_on_held_out_drone_frames():
    model, long_side, _ = load_checkpoint()
    iou = evaluate(model, load_drone(SHARED / "data", "val", long_side), long_side)
    assert iou["drone"] >= MIN_DRONE_IOU, f"held-out drone-frame IoU {iou}"
