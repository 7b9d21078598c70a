"""Build the vehicle-detector training set (YOLO layout) from the shared drone-detection data.

Classes: 0 car, 1 truck, 2 bus, 3 van. Humans, bicycles, cyclists and motorbikes are dropped; minibus and van become
``van``, trailer becomes ``truck``.

Large frames (long side >= 1920 px) are cut into 640x640 tiles at native resolution, with overlap, AND added once
downscaled to 640 px: the pipeline runs tiled inference on large frames, where vehicles seen from 100+ m are ~10-50 px,
and plain full-frame inference, where they are smaller still; the model must see both scales.

Train/val split is BY SCENE, so no place is in both (see ``SOURCES`` and docs/detector.md):
  - madison_drone_view: "Drone2_(n)" (second flight) -> train; "<k>_<n>" (first flight, "Drone1 640cuts") -> val
  - aerial_cars_drone: flight DJI_0762 (a tram street seen by no other flight) -> val; DJI_0005, DJI_0013 and
    DJI-00760 (the same crossroads) and the 4K photos DJI_00NN (square, market) -> train
  - au_air: the two flights recorded on other days (2019-08-29, 2019-09-06) -> val; four 2019-09-05 flights -> train
    (two more with badly drawn boxes are left out)
  - drift_obb: one site, three frames -> train only (the only 4K, ~250 m altitude data we have)
The UAVDT sequence in data/mot is the held-out tracking test and is never read here.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import yaml
from tqdm import tqdm

CLASS_NAMES: tuple[str, ...] = ("car", "truck", "bus", "van")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
DEFAULT_DATA_DIR = Path("~/.cache/airpatrol/detector_data").expanduser()
BUILD_VERSION = 4  # bump when the build logic changes so cached builds are redone


class DatasetError(ValueError):
    """Bad input data (missing folder, malformed label file, class id out of range)."""


@dataclass(frozen=True)
class TilingConfig:
    tile: int = 640  # tile side in pixels, at native resolution
    min_overlap: int = 128  # neighbouring tiles share at least this many pixels
    tile_min_side: int = 1920  # frames whose long side is at least this are tiled
    min_visible: float = 0.4  # keep a box cut by a tile edge if this fraction of its area is inside
    background_keep: float = 0.25  # share of vehicle-free tiles kept (a third of all tiles are empty; CPU time)


@dataclass(frozen=True)
class Source:
    """One shared data set: where it is, how its labels read, and how its frames group into scenes."""

    name: str
    class_map: dict[int, int | None]  # source class id -> our class id (None = drop)
    scene_of: Callable[[str], str]  # image stem -> scene id
    val_scenes: frozenset[str]
    obb: bool = False  # labels are 4 corner points (class x1 y1 ... x4 y4), not cx cy w h
    incomplete: bool = False  # some vehicles are not labelled (parked cars, image borders): let a teacher add them
    excluded_scenes: frozenset[str] = frozenset()  # scenes left out altogether (e.g. badly drawn boxes)


@dataclass(frozen=True)
class LabelTeacher:
    """Adds the vehicles a detector is sure of and the labels miss, in the TRAIN images of ``incomplete`` sources.

    AU-AIR labels only the traffic, not the cars parked in the lots it films, and aerial-cars misses some vehicles
    at the image borders: left as they are, those teach the network that such cars are background (the first
    training run lost half its recall on UAVDT). Val images keep their human labels only.
    """

    weights: Path  # an Ultralytics checkpoint with our CLASS_NAMES (the COCO vehicle head before fine-tuning)
    conf: float = 0.4  # only detections this sure become labels
    max_iou: float = 0.3  # a detection overlapping a label more than this is that label, not a missed vehicle

    def identity(self) -> str:
        """Names the teacher by its weights' content (the checkpoint file also holds a save date)."""
        import torch

        state = torch.load(self.weights, map_location="cpu", weights_only=False)["model"].state_dict()
        digest = hashlib.sha256()
        for key in sorted(state):
            digest.update(key.encode())
            digest.update(state[key].float().numpy().tobytes())
        return f"{digest.hexdigest()[:16]}:{self.conf}:{self.max_iou}"

    def missing_labels(self, model, image: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """(M, 5) extra ``cls cx cy w h`` rows for confident detections that match no label."""
        import torch
        from torchvision.ops import box_iou

        boxes = model.predict(image, imgsz=640, conf=self.conf, verbose=False)[0].boxes
        if len(boxes) == 0:
            return np.zeros((0, 5))
        pred = boxes.xyxyn.cpu().double()
        if len(labels):
            cx, cy, w, h = (torch.from_numpy(labels[:, i]) for i in range(1, 5))
            gt = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=1)
            new = box_iou(pred, gt).max(dim=1).values <= self.max_iou
        else:
            new = torch.ones(len(pred), dtype=torch.bool)
        xywh = boxes.xywhn.cpu().double()[new].numpy()
        return np.concatenate([boxes.cls.cpu().double()[new].numpy()[:, None], xywh], axis=1)


def _madison_scene(stem: str) -> str:
    return "drone2" if stem.startswith("Drone2") else "drone1"


def _aerial_scene(stem: str) -> str:
    match = re.match(r"(DJI[-_]\d+)[-_]\d+$", stem)
    return match.group(1).replace("-", "_") if match else "DJI_photos"  # lone 4K photos DJI_00NN


def _au_air_scene(stem: str) -> str:
    return stem.split("_")[1]  # frame_<YYYYMMDDhhmmss>_... -> the flight (recording start)


SOURCES: tuple[Source, ...] = (
    Source("madison_drone_view", {0: 0}, _madison_scene, frozenset({"drone1"})),
    # aerial.names: car, truck, bus, minibus, cyclist
    Source(
        "aerial_cars_drone", {0: 0, 1: 1, 2: 2, 3: 3, 4: None}, _aerial_scene, frozenset({"DJI_0762"}), incomplete=True
    ),
    # AU-AIR: Human, Car, Truck, Van, Motorbike, Bicycle, Bus, Trailer
    # Flights 2019-09-05 11:19:47 and 14:21:19 have boxes far larger than / off their vehicles (median IoU with a
    # COCO detection 0.37 and 0.55, area ratio up to 1.7; the other train flights ~0.7 and ~1.1): left out.
    Source(
        "au_air",
        {0: None, 1: 0, 2: 1, 3: 3, 4: None, 5: None, 6: 2, 7: 1},
        _au_air_scene,
        frozenset({"20190829091111", "20190906150731"}),
        incomplete=True,
        excluded_scenes=frozenset({"20190905111947", "20190905142119"}),
    ),
    # DRIFT data.yaml: bus, car, truck
    Source("drift_obb", {0: 2, 1: 0, 2: 1}, lambda stem: "drift_site_A", frozenset(), obb=True),
)


def obb_to_aabb(corners: np.ndarray) -> np.ndarray:
    """(N, 8) normalised corner points x1 y1 .. x4 y4 -> (N, 4) normalised cx cy w h of the enclosing box, clipped."""
    corners = np.asarray(corners, dtype=np.float64).reshape(-1, 4, 2)
    lo = np.clip(corners.min(axis=1), 0.0, 1.0)
    hi = np.clip(corners.max(axis=1), 0.0, 1.0)
    return np.concatenate([(lo + hi) / 2, hi - lo], axis=1)


def read_labels(path: Path, class_map: dict[int, int | None], obb: bool = False) -> np.ndarray:
    """(N, 5) rows ``cls cx cy w h`` (normalised) in OUR class ids; dropped classes removed."""
    if not path.exists():
        return np.zeros((0, 5))
    rows = []
    want = 9 if obb else 5
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != want:
            raise DatasetError(f"{path}:{line_no}: expected {want} numbers, got {len(parts)}")
        try:
            values = [float(p) for p in parts]
        except ValueError as exc:
            raise DatasetError(f"{path}:{line_no}: not a number ({exc})") from exc
        src_cls = int(values[0])
        if src_cls not in class_map:
            raise DatasetError(f"{path}:{line_no}: unknown class id {src_cls}")
        ours = class_map[src_cls]
        if ours is None:
            continue
        box = obb_to_aabb(np.array(values[1:]))[0] if obb else np.array(values[1:])
        rows.append([ours, *box])
    return np.array(rows, dtype=np.float64).reshape(-1, 5)


def tile_origins(length: int, tile: int, min_overlap: int) -> list[int]:
    """Evenly spaced tile starts covering [0, length) with at least ``min_overlap`` px shared by neighbours."""
    if length <= tile:
        return [0]
    n = int(np.ceil((length - min_overlap) / (tile - min_overlap)))
    return [int(round(i * (length - tile) / (n - 1))) for i in range(n)]


def tile_labels(
    labels: np.ndarray, width: int, height: int, x0: int, y0: int, tile: int, min_visible: float
) -> np.ndarray:
    """Labels of one tile (normalised to the tile), boxes cut by the tile edge kept if ``min_visible`` is inside."""
    if len(labels) == 0:
        return labels
    cx, cy, w, h = (labels[:, i] * s for i, s in zip(range(1, 5), (width, height, width, height)))
    x1, y1, x2, y2 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
    cx1, cy1 = np.clip(x1, x0, x0 + tile), np.clip(y1, y0, y0 + tile)
    cx2, cy2 = np.clip(x2, x0, x0 + tile), np.clip(y2, y0, y0 + tile)
    inside = (cx2 - cx1) * (cy2 - cy1)
    keep = (inside >= min_visible * np.maximum(w * h, 1e-9)) & (cx2 - cx1 >= 2) & (cy2 - cy1 >= 2)
    out = np.stack([labels[:, 0], (cx1 + cx2) / 2 - x0, (cy1 + cy2) / 2 - y0, cx2 - cx1, cy2 - cy1], axis=1)[keep]
    out[:, 1:] /= tile
    return out


def _write(image: np.ndarray, labels: np.ndarray, out_dir: Path, split: str, name: str) -> None:
    cv2.imwrite(str(out_dir / "images" / split / f"{name}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 95])
    lines = [f"{int(c)} {x:.6f} {y:.6f} {w:.6f} {h:.6f}" for c, x, y, w, h in labels]
    (out_dir / "labels" / split / f"{name}.txt").write_text("\n".join(lines) + ("\n" if lines else ""))


def _samples(image: np.ndarray, labels: np.ndarray, cfg: TilingConfig) -> Iterable[tuple[str, np.ndarray, np.ndarray]]:
    """(suffix, image, labels) for one frame: itself if small, else native-resolution tiles + one downscaled copy."""
    height, width = image.shape[:2]
    if max(width, height) < cfg.tile_min_side:
        yield "", image, labels
        return
    for y0 in tile_origins(height, cfg.tile, cfg.min_overlap):
        for x0 in tile_origins(width, cfg.tile, cfg.min_overlap):
            crop = image[y0 : y0 + cfg.tile, x0 : x0 + cfg.tile]
            yield f"__x{x0}_y{y0}", crop, tile_labels(labels, width, height, x0, y0, cfg.tile, cfg.min_visible)
    scale = cfg.tile / max(width, height)  # normalised labels are unchanged by a uniform resize
    small = cv2.resize(image, (round(width * scale), round(height * scale)), interpolation=cv2.INTER_AREA)
    yield "__full", small, labels


def _keep_background(name: str, cfg: TilingConfig) -> bool:
    """Deterministic (name-hashed, not random) choice of the empty tiles to keep."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < cfg.background_keep


def _source_images(root: Path, source: Source) -> list[Path]:
    folder = root / source.name / "images"
    if not folder.is_dir():
        raise DatasetError(f"{folder}: missing image folder of source {source.name}")
    return sorted(
        p
        for p in folder.iterdir()
        if p.suffix.lower() in IMAGE_SUFFIXES and source.scene_of(p.stem) not in source.excluded_scenes
    )


def check_extra_dir(extra: Path) -> Path:
    """An extra YOLO-format set must have images/ and labels/ and use our class ids; returns its images folder."""
    images, labels = extra / "images", extra / "labels"
    if not images.is_dir() or not labels.is_dir():
        raise DatasetError(f"{extra}: extra set needs 'images/' and 'labels/' sub-folders (YOLO layout)")
    for label_file in sorted(labels.rglob("*.txt")):
        for line_no, line in enumerate(label_file.read_text().splitlines(), 1):
            parts = line.split()
            if parts and (len(parts) != 5 or not parts[0].isdigit() or int(parts[0]) >= len(CLASS_NAMES)):
                raise DatasetError(
                    f"{label_file}:{line_no}: want 'cls cx cy w h' with cls in 0..{len(CLASS_NAMES) - 1}"
                )
    return images.resolve()


def _fingerprint(
    shared_detection: Path, cfg: TilingConfig, sources: Sequence[Source], teacher: LabelTeacher | None
) -> str:
    listing = [str(BUILD_VERSION), repr(cfg), teacher.identity() if teacher else "no teacher"]
    for source in sources:
        listing.append(
            f"{source.name}:{sorted(source.val_scenes)}:{sorted(source.excluded_scenes)}:"
            f"{source.class_map}:{source.incomplete}"
        )
        listing += [f"{p.name}:{p.stat().st_size}" for p in _source_images(shared_detection, source)]
    return hashlib.sha256("\n".join(listing).encode()).hexdigest()[:16]


def build_dataset(
    shared_detection: Path,
    out_dir: Path | None = None,
    extra_dirs: Sequence[Path] = (),
    cfg: TilingConfig = TilingConfig(),
    sources: Sequence[Source] = SOURCES,
    teacher: LabelTeacher | None = None,
) -> Path:
    """Write images/{train,val}, labels/{train,val} and data.yaml under ``out_dir``; returns the data.yaml path.

    With a ``teacher``, the train images of ``incomplete`` sources also get the vehicles it finds and the labels miss.

    A finished build with the same inputs is reused (manifest.json holds a fingerprint of the inputs).
    """
    out_dir = Path(out_dir or DEFAULT_DATA_DIR).expanduser().resolve()
    shared_detection = Path(shared_detection)
    extras = [check_extra_dir(Path(e)) for e in extra_dirs]
    fingerprint = _fingerprint(shared_detection, cfg, sources, teacher)
    manifest_path = out_dir / "manifest.json"
    if manifest_path.exists() and json.loads(manifest_path.read_text()).get("fingerprint") == fingerprint:
        manifest = json.loads(manifest_path.read_text())
    else:
        manifest = _build(shared_detection, out_dir, cfg, sources, teacher)
        manifest["fingerprint"] = fingerprint
        manifest_path.write_text(json.dumps(manifest, indent=1))
    data = {
        "path": str(out_dir),
        "train": ["images/train", *map(str, extras)],
        "val": "images/val",
        "names": dict(enumerate(CLASS_NAMES)),
    }
    yaml_path = out_dir / "data.yaml"
    yaml_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return yaml_path


def _build(
    shared_detection: Path, out_dir: Path, cfg: TilingConfig, sources: Sequence[Source], teacher: LabelTeacher | None
) -> dict:
    for sub in ("images", "labels"):
        shutil.rmtree(out_dir / sub, ignore_errors=True)
        for split in ("train", "val"):
            (out_dir / sub / split).mkdir(parents=True)
    jobs = [(source, path) for source in sources for path in _source_images(shared_detection, source)]
    stats: dict[str, dict[str, int]] = {}
    teacher_model = None
    if teacher is not None:
        from ultralytics import YOLO

        teacher_model = YOLO(str(teacher.weights), task="detect")
    for source, path in tqdm(jobs, desc="building detector data", unit="frame"):
        scene = source.scene_of(path.stem)
        split = "val" if scene in source.val_scenes else "train"
        labels = read_labels(path.parent.parent / "labels" / f"{path.stem}.txt", source.class_map, source.obb)
        image = cv2.imread(str(path))
        if image is None:
            raise DatasetError(f"{path}: unreadable image")
        key = f"{source.name}/{split}"
        entry = stats.setdefault(key, {"frames": 0, "images": 0, "boxes": 0, "teacher_boxes": 0})
        entry["frames"] += 1
        for suffix, sample, sample_labels in _samples(image, labels, cfg):
            name = f"{source.name}__{path.stem}{suffix}"
            if teacher is not None and teacher_model is not None and source.incomplete and split == "train":
                extra = teacher.missing_labels(teacher_model, sample, sample_labels)
                sample_labels = np.concatenate([sample_labels, extra])
                entry["teacher_boxes"] += len(extra)
            if suffix.startswith("__x") and len(sample_labels) == 0 and not _keep_background(name, cfg):
                continue
            _write(sample, sample_labels, out_dir, split, name)
            entry["images"] += 1
            entry["boxes"] += len(sample_labels)
    scenes = {
        f"{s.name}/{split}": sorted(
            {
                s.scene_of(p.stem)
                for p in _source_images(shared_detection, s)
                if (s.scene_of(p.stem) in s.val_scenes) == (split == "val")
            }
        )
        for s in sources
        for split in ("train", "val")
    }
    return {"stats": stats, "scenes": scenes}
