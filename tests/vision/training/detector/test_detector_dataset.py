"""Building the detector's YOLO data set: class mapping, OBB boxes, tiling, scene split, extra folders."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
import yaml

from tests.conftest import shared_path
from vision.training.detector.dataset import (
    SOURCES,
    DatasetError,
    Source,
    TilingConfig,
    build_dataset,
    obb_to_aabb,
    read_labels,
    tile_labels,
    tile_origins,
)

AU_AIR = next(s for s in SOURCES if s.name == "au_air")
AERIAL = next(s for s in SOURCES if s.name == "aerial_cars_drone")


def test_obb_corners_become_the_enclosing_axis_aligned_box():
    # a diamond centred at (0.5, 0.4), half-widths 0.1 x 0.05, and a box partly outside the image
    corners = np.array([[0.5, 0.35, 0.6, 0.4, 0.5, 0.45, 0.4, 0.4], [0.9, 0.9, 1.1, 0.9, 1.1, 1.0, 0.9, 1.0]])
    np.testing.assert_allclose(obb_to_aabb(corners), [[0.5, 0.4, 0.2, 0.1], [0.95, 0.95, 0.1, 0.1]], atol=1e-12)


def test_class_mapping_drops_people_and_merges_vans_and_trailers(tmp_path):
    label = tmp_path / "a.txt"
    # AU-AIR ids: 0 Human, 1 Car, 2 Truck, 3 Van, 4 Motorbike, 5 Bicycle, 6 Bus, 7 Trailer
    label.write_text("".join(f"{c} 0.5 0.5 0.1 0.1\n" for c in range(8)))
    assert read_labels(label, AU_AIR.class_map)[:, 0].tolist() == [0, 1, 3, 2, 1]  # car truck van bus truck
    # aerial-cars: car truck bus minibus cyclist
    label.write_text("".join(f"{c} 0.5 0.5 0.1 0.1\n" for c in range(5)))
    assert read_labels(label, AERIAL.class_map)[:, 0].tolist() == [0, 1, 2, 3]


def test_malformed_label_lines_name_the_file_and_line(tmp_path):
    label = tmp_path / "bad.txt"
    label.write_text("1 0.5 0.5 0.1 0.1\n1 0.5 oops 0.1 0.1\n")
    with pytest.raises(DatasetError, match=r"bad.txt:2"):
        read_labels(label, AU_AIR.class_map)
    label.write_text("9 0.5 0.5 0.1 0.1\n")
    with pytest.raises(DatasetError, match="unknown class id 9"):
        read_labels(label, AU_AIR.class_map)


@pytest.mark.parametrize("length", [640, 1080, 1920, 2160, 4000])
def test_tiles_cover_the_frame_with_overlap(length):
    starts = tile_origins(length, 640, 128)
    assert starts[0] == 0 and starts[-1] + 640 == max(length, 640)
    assert all(b - a <= 640 - 128 for a, b in zip(starts, starts[1:]))  # neighbours share >= 128 px


def test_boxes_cut_by_a_tile_edge_are_kept_only_if_mostly_inside():
    # 1000x1000 frame; box A 100 px wide centred on x=640 (half inside tile 0), box B mostly inside
    labels = np.array([[0, 0.64, 0.1, 0.1, 0.05], [1, 0.61, 0.3, 0.1, 0.05]])
    out = tile_labels(labels, 1000, 1000, 0, 0, 640, min_visible=0.6)
    assert out[:, 0].tolist() == [1]
    np.testing.assert_allclose(out[0, 1:] * 640, [(560 + 640) / 2, 300, 80, 50])
    assert len(tile_labels(labels, 1000, 1000, 0, 0, 640, min_visible=0.4)) == 2


def _fake_shared(root, big_size=(2000, 1100)):
    """Two tiny sources: 'fake_big' (one large frame per scene, tiled) and 'fake_small' (640 px frames)."""
    rng = np.random.default_rng(0)
    for name, size, stems in (
        ("fake_big", big_size, ["sceneA_1", "sceneB_1"]),
        ("fake_small", (640, 640), ["sceneA_1", "sceneA_2", "sceneB_1"]),
    ):
        (root / name / "images").mkdir(parents=True)
        (root / name / "labels").mkdir()
        for stem in stems:
            cv2.imwrite(
                str(root / name / "images" / f"{stem}.jpg"), rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
            )
            (root / name / "labels" / f"{stem}.txt").write_text("0 0.1 0.1 0.02 0.03\n5 0.5 0.5 0.1 0.1\n")
    scene = lambda stem: stem.split("_")[0]  # noqa: E731
    return [
        Source("fake_big", {0: 0, 5: None}, scene, frozenset({"sceneB"})),
        Source("fake_small", {0: 0, 5: None}, scene, frozenset({"sceneB"})),
    ]


def test_build_tiles_large_frames_splits_by_scene_and_appends_extra_sets(tmp_path):
    sources = _fake_shared(tmp_path / "shared")
    extra = tmp_path / "synth"
    (extra / "images").mkdir(parents=True)
    (extra / "labels").mkdir()
    (extra / "labels" / "s.txt").write_text("3 0.5 0.5 0.1 0.1\n")
    cfg = TilingConfig(background_keep=1.0)
    data_yaml = build_dataset(tmp_path / "shared", tmp_path / "out", extra_dirs=[extra], cfg=cfg, sources=sources)

    data = yaml.safe_load(data_yaml.read_text())
    assert data["names"] == {0: "car", 1: "truck", 2: "bus", 3: "van"}
    assert data["train"] == ["images/train", str((extra / "images").resolve())]
    train = sorted(p.stem for p in (tmp_path / "out" / "images" / "train").iterdir())
    val = sorted(p.stem for p in (tmp_path / "out" / "images" / "val").iterdir())
    n_tiles = len(tile_origins(2000, 640, 128)) * len(tile_origins(1100, 640, 128))
    assert len(train) == n_tiles + 1 + 2  # sceneA big: tiles + downscaled; two small sceneA frames
    assert len(val) == n_tiles + 1 + 1
    assert not any("sceneB" in s for s in train) and all("sceneB" in s for s in val)
    full = cv2.imread(str(tmp_path / "out" / "images" / "train" / "fake_big__sceneA_1__full.jpg"))
    assert max(full.shape[:2]) == 640
    tile_label = (tmp_path / "out" / "labels" / "train" / "fake_big__sceneA_1__x0_y0.txt").read_text().split()
    # the car at (200, 110) px, 40x33 px, lands in tile (0, 0) unscaled; class 5 (a person) is dropped
    np.testing.assert_allclose([float(v) for v in tile_label], [0, 200 / 640, 110 / 640, 40 / 640, 33 / 640], atol=1e-5)

    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["scenes"]["fake_big/val"] == ["sceneB"]
    stamp = (tmp_path / "out" / "manifest.json").stat().st_mtime_ns
    build_dataset(tmp_path / "shared", tmp_path / "out", cfg=cfg, sources=sources)  # same inputs: reused
    assert (tmp_path / "out" / "manifest.json").stat().st_mtime_ns == stamp


def test_bad_extra_folder_is_a_clear_error(tmp_path):
    sources = _fake_shared(tmp_path / "shared")
    with pytest.raises(DatasetError, match="images/"):
        build_dataset(tmp_path / "shared", tmp_path / "out", extra_dirs=[tmp_path / "nothing"], sources=sources)
    extra = tmp_path / "synth"
    (extra / "images").mkdir(parents=True)
    (extra / "labels").mkdir()
    (extra / "labels" / "s.txt").write_text("7 0.5 0.5 0.1 0.1\n")
    with pytest.raises(DatasetError, match=r"s.txt:1"):
        build_dataset(tmp_path / "shared", tmp_path / "out", extra_dirs=[extra], sources=sources)


@pytest.mark.shared
def test_shared_build_keeps_scenes_apart_and_never_reads_the_tracking_test_sequence(tmp_path):
    detection = shared_path("data", "detection")
    data_yaml = build_dataset(detection, tmp_path / "data")
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    for source in SOURCES:
        train, val = manifest["scenes"][f"{source.name}/train"], manifest["scenes"][f"{source.name}/val"]
        assert not set(train) & set(val)
        assert train  # every source contributes training data
    names = [p.name for split in ("train", "val") for p in (tmp_path / "data" / "images" / split).iterdir()]
    assert not any("M1303" in n or "uavdt" in n.lower() for n in names)
    assert any(n.startswith("drift_obb__") and "__x" in n for n in names)  # 4K frames were tiled
    for label in (tmp_path / "data" / "labels").rglob("*.txt"):
        if label.stat().st_size:  # empty = background tile
            rows = np.loadtxt(label, ndmin=2)
            assert set(rows[:, 0].astype(int)) <= {0, 1, 2, 3}
            assert (rows[:, 1:] >= 0).all() and (rows[:, 1:] <= 1).all()
    assert yaml.safe_load(data_yaml.read_text())["val"] == "images/val"


class _FakeBoxes:
    """The few attributes of ultralytics' Boxes that LabelTeacher reads; class 0 (car) for every box."""

    def __init__(self, xyxyn):
        import torch

        self.xyxyn = torch.tensor(xyxyn, dtype=torch.float64).reshape(-1, 4)
        x1, y1, x2, y2 = self.xyxyn.unbind(1)
        self.xywhn = torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], 1)
        self.cls = torch.zeros(len(self.xyxyn))

    def __len__(self):
        return len(self.xyxyn)


class _FakeDetector:
    """Stands in for a YOLO model: always 'detects' the given normalised xyxy boxes."""

    def __init__(self, xyxyn):
        self.boxes = _FakeBoxes(xyxyn)

    def predict(self, image, **kwargs):
        from types import SimpleNamespace

        return [SimpleNamespace(boxes=self.boxes)]


def test_teacher_adds_only_detections_that_match_no_label(tmp_path):
    from vision.training.detector.dataset import LabelTeacher

    teacher = LabelTeacher(tmp_path / "unused.pt")
    labels = np.array([[1, 0.25, 0.25, 0.1, 0.1]])  # a truck at (0.2..0.3)
    detector = _FakeDetector(
        [
            [0.2, 0.2, 0.3, 0.3],  # the labelled truck again -> not added
            [0.6, 0.6, 0.7, 0.65],
        ]
    )  # a car the labels miss -> added
    extra = teacher.missing_labels(detector, np.zeros((64, 64, 3), np.uint8), labels)
    np.testing.assert_allclose(extra, [[0, 0.65, 0.625, 0.1, 0.05]])
    assert len(teacher.missing_labels(_FakeDetector([]), np.zeros((8, 8, 3), np.uint8), labels)) == 0


def test_excluded_scenes_are_left_out(tmp_path):
    sources = [
        Source(s.name, s.class_map, s.scene_of, s.val_scenes, excluded_scenes=frozenset({"sceneA"}))
        for s in _fake_shared(tmp_path / "shared")
    ]
    build_dataset(tmp_path / "shared", tmp_path / "out", cfg=TilingConfig(background_keep=1.0), sources=sources)
    assert not list((tmp_path / "out" / "images" / "train").iterdir())
    assert all("sceneB" in p.name for p in (tmp_path / "out" / "images" / "val").iterdir())
