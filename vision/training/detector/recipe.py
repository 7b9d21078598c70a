"""The shipped detector's training run (issue 23): continue a vehicle detector on day + night data across scales.

One uninterrupted run, deterministic for a machine and thread count (seed, Ultralytics ``deterministic=True``, no
data-loader workers on CPU). Training list, every part chosen by ``seed`` from sorted file lists:

- day images of the day data set (``dataset.build_dataset``: native 640 px tiles, whole frames downscaled to 640);
- half-scale collages of other 640 px day images (``scales.half_scale_collages``): vehicles at 20-50 px;
- night-like copies of other day images (``lowlight.low_light_copies``);
- real night frames, UAVDT M1003 frames 331-600 only (frames 1-240 are scored, 241-330 are a gap): every 2nd frame
  whole (shown at 0.625 scale), and native-resolution 640 px tiles of every 4th (``scales.native_tiles``).
- optionally (``turned_images``, none in the shipped run) other day images turned by random angles
  (``turns.turned_copies``).

Nothing of UAVDT M1303 or M0703 is read (both are scored). ``training_set.json`` beside the weights names every
input by a path relative to the project or ``../shared`` and the start weights by their SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from vision.training.detector import DEFAULT_BATCH, DEFAULT_FREEZE, NIGHT_DEV_TRAIN_FRAMES


@dataclass(frozen=True)
class AcrossScalesMix:
    # Sized for ~40 min on 2 shared CPU cores (one epoch of ~1,000 images; docs/detector.md).
    day_images: int = 450
    collage_sources: int = 600  # 640 px day images put four to a half-scale collage (-> 150 collages)
    low_light_images: int = 120
    night_step: int = 2  # every 2nd night frame, whole
    night_repeat: int = 1
    night_native_step: int = 4  # every 4th night frame as native 640 px tiles
    epochs: int = 1
    lr0: float = 0.0005  # AdamW, constant over the epoch, no warm-up: a continuation, not a fresh fine-tune
    freeze: int = DEFAULT_FREEZE
    batch: int = DEFAULT_BATCH
    seed: int = 0
    # other day images, each turned by a random angle (``turns.turned_copies``; 0 in the shipped run): the day data
    # shows most vehicles along the image axes (docs/detector.md, "Any heading")
    turned_images: int = 0
    # Ultralytics' random rotation of every training image (+- degrees; 0 in the shipped run): vehicles at any heading,
    # but each box the bound of its turned box, loose on a diagonal vehicle (docs/detector.md, "Any heading")
    degrees: float = 0.0


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _pick(paths: list[Path], order, start: int, count: int) -> list[Path]:
    return [paths[i] for i in order[start : start + count]]


def train_across_scales(
    out_weights: Path,
    start: Path,
    mix: AcrossScalesMix = AcrossScalesMix(),
    data_dir: Path | None = None,
    shared: Path | None = None,
    fraction: float = 1.0,
) -> Path:
    """Build the mixed training list, continue ``start`` on it, write ``out_weights`` and its ``training_set.json``."""
    import numpy as np
    import torch
    import yaml

    from vision.training.detector.dataset import CLASS_NAMES
    from vision.training.detector.lowlight import low_light_copies, uavdt_frames
    from vision.training.detector.scales import half_scale_collages, native_tiles
    from vision.training.detector.training import _train, day_training_set, portable_path
    from vision.training.detector.turns import turned_copies

    night_dev = Path("data") / "mot" / "uavdt_M1003_night_dev"
    night_gt_file = night_dev / "gt" / "M1003_gt_whole.txt"
    shared, data_dir, day = day_training_set(start, shared, data_dir, needed=[str(night_gt_file)])
    detection, night_seq, night_gt = shared / "data" / "detection", shared / night_dev, shared / night_gt_file
    labels = data_dir / "labels" / "train"
    order = np.random.default_rng(mix.seed).permutation(len(day))
    day_pick = sorted(_pick(day, order, 0, mix.day_images))
    dark_pick = sorted(_pick(day, order, mix.day_images, mix.low_light_images))
    rest = [day[i] for i in order[mix.day_images + mix.low_light_images :]] + [day[i] for i in order]
    full_size = [p for p in dict.fromkeys(rest) if "__full" not in p.stem]  # 640x640: madison crops, native tiles
    collage_pick = full_size[: mix.collage_sources]
    turned_pick = sorted(day[i] for i in order[len(order) - mix.turned_images :]) if mix.turned_images else []

    work = data_dir / "across_scales"
    shutil.rmtree(work, ignore_errors=True)
    started = time.monotonic()
    half_scale_collages(collage_pick, labels, work / "half")
    low_light_copies(dark_pick, labels, work / "dark", seed=mix.seed)
    turned = turned_copies(turned_pick, labels, work / "turned", seed=mix.seed)
    first, last = NIGHT_DEV_TRAIN_FRAMES
    uavdt_frames(night_seq / "video.mp4", night_gt, (first, last), work / "night", step=mix.night_step)
    uavdt_frames(night_seq / "video.mp4", night_gt, (first, last), work / "night_whole", step=mix.night_native_step)
    native_tiles(
        sorted((work / "night_whole" / "images").glob("*.jpg")), work / "night_whole" / "labels", work / "night_native"
    )
    shutil.rmtree(work / "night_whole")
    parts = {
        "day": day_pick,
        "half_scale_collages": sorted((work / "half" / "images").glob("*.jpg")),
        "low_light_copies": sorted((work / "dark" / "images").glob("*.jpg")),
        "night_whole": sorted((work / "night" / "images").glob("*.jpg")) * mix.night_repeat,
        "night_native_tiles": sorted((work / "night_native" / "images").glob("*.jpg")),
        "turned_copies": sorted(turned),
    }
    train_list = work / "train.txt"
    train_list.write_text("".join(f"{p}\n" for paths in parts.values() for p in paths))
    yaml_path = work / "data.yaml"
    names = dict(enumerate(CLASS_NAMES))
    # Ultralytics validates twice at the end of a run; on an eighth of the held-out val split that is a check, not
    # half an hour of CPU (bench/detector_eval.py --parts val scores the whole split)
    val_list = work / "val.txt"
    val_list.write_text("".join(f"{p}\n" for p in sorted((data_dir / "images" / "val").glob("*.jpg"))[::8]))
    yaml_path.write_text(
        yaml.safe_dump({"path": str(data_dir), "train": str(train_list), "val": str(val_list), "names": names})
    )
    print(f"training list: { ({k: len(v) for k, v in parts.items()}) } built in {time.monotonic() - started:.0f} s")

    run_dir = data_dir / "runs"
    name = f"across_scales_e{mix.epochs}_s{mix.seed}"
    shutil.rmtree(run_dir / name, ignore_errors=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    started = time.monotonic()
    _train(
        Path(start),
        yaml_path,
        mix.epochs,
        640,
        mix.batch,
        mix.seed,
        fraction,
        mix.freeze,
        run_dir,
        name,
        optimizer="AdamW",
        lr0=mix.lr0,
        # Ultralytics' warm-up starts every bias at lr 0.1, an SGD value: Adam steps that size wreck a trained head
        warmup_epochs=0.0,
        warmup_bias_lr=0.0,
        nbs=mix.batch,  # one optimizer step per batch (the default, 64, would give ~16 steps in the whole run)
        **({"degrees": mix.degrees} if mix.degrees else {}),
    )
    minutes = (time.monotonic() - started) / 60
    out_weights = Path(out_weights)
    out_weights.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run_dir / name / "weights" / "last.pt", out_weights)
    record = {
        "start": {"weights": portable_path(Path(start)), "sha256": sha256(Path(start))},
        "recipe": asdict(mix),
        "train_images": {k: len(v) for k, v in parts.items()},
        "day_data": {
            "source": portable_path(detection),
            "build": "vision/training/detector/dataset.py (train scenes only; val scenes held out)",
        },
        "night": {
            "source": portable_path(night_seq / "video.mp4"),
            "gt": portable_path(night_gt),
            "frames": [first, last],
            "scored_elsewhere": "M1003 frames 1-240 are scored (bench/real); 241-330 are a gap",
        },
        "never_read": ["../shared/data/mot/uavdt_M1303", "../shared/data/mot/uavdt_M0703_nadir_dev"],
        "fraction": fraction,
        "train_minutes": round(minutes, 1),
        "weights_sha256": sha256(out_weights),
    }
    out_weights.with_suffix(".training_set.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"trained {mix.epochs} epochs in {minutes:.1f} min -> {out_weights}")
    return out_weights
