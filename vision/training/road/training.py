"""Train the road U-Net (``airpatrol train-road``) and measure its IoU on held-out tiles and drone frames."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from tqdm import tqdm

from vision.road.unet import DEFAULT_LONG_SIDE, DEFAULT_WEIGHTS, RoadUNet, predict_proba, save_checkpoint, to_tensor
from vision.training.road.augment import batch as augmented_batch
from vision.training.road.data import Sample, epfl_split, load_drone, load_extra, load_tiles
from vision.training.road.labels import DRONE_LABELS

REPO_ROOT = Path(__file__).resolve().parents[3]


def shared_root() -> Path:
    """The shared data folder: env ``AIRPATROL_SHARED`` or ``../shared`` next to the repository."""
    return Path(os.environ.get("AIRPATROL_SHARED") or REPO_ROOT / ".." / "shared").resolve()


def default_data_dirs() -> list[Path]:
    return [shared_root() / "data" / "road_seg" / "epfl_aerial"]


def masked_loss(logits: torch.Tensor, road: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """BCE + soft Dice over valid pixels: BCE for per-pixel calibration, Dice against the road/background imbalance."""
    bce = (F.binary_cross_entropy_with_logits(logits, road, reduction="none") * valid).sum() / valid.sum().clamp(min=1)
    p = torch.sigmoid(logits) * valid
    dice = 1 - (2 * (p * road).sum() + 1) / (p.sum() + (road * valid).sum() + 1)
    return bce + dice


def evaluate(
    model: RoadUNet, samples: list[Sample], long_side: int, device: str = "cpu", threshold: float = 0.5
) -> dict[str, float]:
    """IoU of the thresholded road map, pooled over the valid pixels of each group ("epfl", "drone", "drone/<site>")."""
    model.eval()
    inter: defaultdict[str, int] = defaultdict(int)
    union: defaultdict[str, int] = defaultdict(int)
    for s in samples:
        # The whole stored image goes through the same resize as a video frame would.
        pred = predict_proba(model, s.image, long_side, device) >= threshold
        gt, valid = s.road > 0, s.valid > 0
        keys = [s.source] + ([f"drone/{s.id.split('_')[0]}"] if s.source == "drone" else [])
        for k in keys:
            inter[k] += int((pred & gt & valid).sum())
            union[k] += int(((pred | gt) & valid).sum())
    return {k: inter[k] / union[k] if union[k] else float("nan") for k in sorted(union)}


def train_road(
    out: Path = DEFAULT_WEIGHTS,
    data_dirs: list[Path] | None = None,
    labels: Path | None = DRONE_LABELS,
    extra_dirs: Sequence[Path] = (),
    epochs: int = 40,
    steps_per_epoch: int = 100,
    batch_size: int = 8,
    crop: int = 160,
    lr: float = 5e-3,
    width: int = 16,
    long_side: int = DEFAULT_LONG_SIDE,
    seed: int = 0,
    threads: int = 1,
    device: str = "cpu",
    bf16: bool = True,
    epfl_share: float = 0.3,
) -> dict:
    """Train on EPFL-style folders (``images/`` + ``masks/``; every 5th tile held out), the hand-labelled drone
    frames of ``labels`` (their "val" entries held out) and ``extra_dirs`` (all used for training: image/mask
    folders or ``airpatrol synth`` scene folders).

    Writes the checkpoint to ``out`` and returns its metadata, including validation IoU per source.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    torch.set_num_threads(max(1, threads))
    device = "cuda" if device == "cuda" and torch.cuda.is_available() else "cpu"
    data_dirs = [Path(d) for d in (data_dirs or default_data_dirs())]

    train, val = [], []
    for d in data_dirs:
        tr, va = epfl_split(d)
        train += load_tiles(tr, "epfl", long_side)
        val += load_tiles(va, "epfl", long_side)
    if labels is not None:
        train += load_drone(shared_root() / "data", "train", long_side, labels)
        val += load_drone(shared_root() / "data", "val", long_side, labels)
    for d in extra_dirs:
        train += load_extra(Path(d), long_side)
    # Each source gets a fixed share of the crops whatever its image count: the few drone frames are the target domain.
    share = {"epfl": epfl_share, "drone": 1.0 - epfl_share, "extra": 0.25}  # relative; absent sources drop out
    counts: defaultdict[str, int] = defaultdict(int)
    for s in train:
        counts[s.source] += 1
    weights = np.array([share[s.source] / counts[s.source] for s in train])
    if not len(train) or weights.sum() <= 0:
        raise ValueError(
            f"no training images with a non-zero share (images per source: {dict(counts)}, epfl_share={epfl_share})"
        )
    weights /= weights.sum()

    model = RoadUNet(width).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    total = epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total, pct_start=0.15)
    t0 = time.time()
    history = []
    bar = tqdm(total=total, desc="train-road", unit="step")
    for epoch in range(epochs):
        model.train()
        losses = []
        for _ in range(steps_per_epoch):
            images, road, valid = augmented_batch(train, weights, batch_size, crop, rng)
            x = to_tensor(images).to(device).contiguous(memory_format=torch.channels_last)
            # bfloat16 autocast roughly halves the step time on CPUs with AVX512-BF16/AMX; the loss stays fp32.
            with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
                logits = model(x)[:, 0]
            loss = masked_loss(logits.float(), torch.from_numpy(road).to(device), torch.from_numpy(valid).to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
        iou = evaluate(model, val, long_side, device)
        history.append({"epoch": epoch + 1, "loss": float(np.mean(losses)), "val_iou": iou})
        tqdm.write(
            f"epoch {epoch + 1}/{epochs} loss {np.mean(losses):.3f} val IoU "
            + " ".join(f"{k}={v:.3f}" for k, v in iou.items())
        )
    bar.close()

    meta = {
        "val_iou": history[-1]["val_iou"] if history else {},
        "val_ids": [s.id for s in val],
        "train_counts": dict(counts),
        "train_seconds": round(time.time() - t0, 1),
        "args": {
            "epochs": epochs,
            "steps_per_epoch": steps_per_epoch,
            "batch_size": batch_size,
            "crop": crop,
            "lr": lr,
            "width": width,
            "seed": seed,
            "bf16": bf16,
            "epfl_share": epfl_share,
            "extra_dirs": [str(d) for d in extra_dirs],
            "labels": str(labels) if labels else None,
        },
        "history": history,
    }
    save_checkpoint(Path(out), model.cpu(), long_side, meta)
    return meta
