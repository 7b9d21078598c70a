"""Readers for ground truth and run outputs. Every problem is one :class:`EvalInputError` naming the file."""

from __future__ import annotations

import configparser
import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


class EvalInputError(ValueError):
    """A missing, empty or garbled evaluation input."""


@dataclass
class Boxes:
    """Boxes of many frames: aligned arrays (frame 1-based, id, left, top, width, height)."""

    frame: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    xywh: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))

    def __len__(self) -> int:
        return len(self.frame)

    def subset(self, keep: np.ndarray) -> "Boxes":
        return Boxes(self.frame[keep], self.ids[keep], self.xywh[keep])

    def by_frame(self) -> dict[int, np.ndarray]:
        """frame -> row indices."""
        out: dict[int, list[int]] = {}
        for i, f in enumerate(self.frame.tolist()):
            out.setdefault(f, []).append(i)
        return {f: np.array(v) for f, v in out.items()}


@dataclass
class GroundTruth:
    boxes: Boxes
    ignore: Boxes  # regions (per frame) where neither predictions nor ground truth count
    kind: str  # "mot" or "uavdt"
    path: Path
    speeds: dict[tuple[int, int], float] | None = None  # (frame, id) -> km/h
    moving: dict[tuple[int, int], bool] | None = None
    road_mask_dir: Path | None = None
    fps: float | None = None
    seq_length: int | None = None


def _rows(path: Path, min_cols: int) -> np.ndarray:
    """Numeric comma-separated rows as a float array (n, >= min_cols)."""
    if not path.is_file():
        raise EvalInputError(f"{path}: file not found")
    rows = []
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parts = [p for p in line.replace(";", ",").replace("\t", ",").split(",")]
            if len(parts) == 1:
                parts = line.split()
            if len(parts) < min_cols:
                raise EvalInputError(f"{path}: line {n} has {len(parts)} columns, expected at least {min_cols}")
            try:
                rows.append([float(p) for p in parts[:10]] + [math.nan] * (10 - len(parts[:10])))
            except ValueError:
                raise EvalInputError(f"{path}: line {n} is not numeric: {line[:60]!r}") from None
    return np.array(rows, np.float64).reshape(-1, 10)


def _boxes(a: np.ndarray) -> Boxes:
    return Boxes(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2:6].astype(np.float64))


def read_mot(path: Path) -> tuple[Boxes, np.ndarray]:
    """MOTChallenge rows (frame,id,left,top,w,h,conf,...): the boxes and the conf column."""
    a = _rows(path, 6)
    if len(a) and (a[:, 0] < 1).any():
        raise EvalInputError(f"{path}: frame numbers must start at 1 (MOTChallenge)")
    if len(a) and ((a[:, 4] < 0) | (a[:, 5] < 0)).any():
        raise EvalInputError(f"{path}: negative box width/height")
    conf = np.where(np.isnan(a[:, 6]), 1.0, a[:, 6]) if len(a) else np.zeros(0)
    return _boxes(a), conf


def read_uavdt(whole: Path, ignore: Path | None) -> tuple[Boxes, Boxes]:
    """UAVDT ``*_gt_whole.txt`` (frame,id,left,top,w,h,out_of_view,occlusion,category) and its ignore regions."""
    gt = _boxes(_rows(whole, 6))
    if ignore is not None and ignore.is_file() and ignore.stat().st_size > 0:
        ign = _boxes(_rows(ignore, 6))
    else:
        ign = Boxes()
    return gt, ign


def read_speeds(path: Path) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], bool]]:
    """Our ``gt/speeds.csv``: frame,id,speed_kmh,ground_x_m,ground_y_m,moving."""
    speeds, moving = {}, {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = {"frame", "id", "speed_kmh"} - set(reader.fieldnames or [])
            if missing:
                raise EvalInputError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
            for n, row in enumerate(reader, 2):
                try:
                    key = (int(row["frame"]), int(row["id"]))
                    speeds[key] = float(row["speed_kmh"])
                    moving[key] = (
                        bool(int(row.get("moving") or 0)) if row.get("moving") not in (None, "") else speeds[key] >= 4.0
                    )
                except (TypeError, ValueError):
                    raise EvalInputError(f"{path}: line {n} is garbled") from None
    except OSError as exc:
        raise EvalInputError(f"{path}: cannot read ({exc.strerror})") from None
    return speeds, moving


def read_track_speeds(path: Path) -> dict[tuple[int, int], float]:
    """``tracks.csv`` of a run: (frame, track_id) -> speed_kmh, rows without a speed left out."""
    out: dict[tuple[int, int], float] = {}
    if not path.is_file():
        raise EvalInputError(f"{path}: file not found")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        missing = {"frame", "track_id", "speed_kmh"} - set(reader.fieldnames or [])
        if missing:
            raise EvalInputError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
        for n, row in enumerate(reader, 2):
            v = (row.get("speed_kmh") or "").strip()
            try:
                key = (int(row["frame"]), int(row["track_id"]))
                if v and v.lower() != "nan":
                    out[key] = float(v)
            except (TypeError, ValueError):
                raise EvalInputError(f"{path}: line {n} is garbled (frame/track_id/speed_kmh)") from None
    return out


def read_seqinfo(path: Path) -> tuple[float | None, int | None]:
    if not path.is_file():
        return None, None
    cp = configparser.ConfigParser()
    try:
        cp.read(path, encoding="utf-8")
        sec = cp["Sequence"]
        fps = float(sec["frameRate"]) if "frameRate" in sec else None
        n = int(sec["seqLength"]) if "seqLength" in sec else None
    except (configparser.Error, KeyError, ValueError):
        raise EvalInputError(f"{path}: not a MOTChallenge seqinfo.ini ([Sequence] frameRate/seqLength)") from None
    return fps, n


def load_ground_truth(path: str | Path, parked: str = "ignore") -> GroundTruth:
    """A scene folder (``gt/gt.txt``), a ``gt`` folder, a MOTChallenge ``gt.txt``, or UAVDT ``*_gt_whole.txt``
    (its ``*_gt_ignore.txt`` beside it is used), or a folder holding one of those.

    ``parked``: what to do with the parked vehicles of a synthetic scene (``scene.json`` kind "parked").
    "ignore" (default) makes them distractors, like MOTChallenge's static persons: finding one is not a false
    positive, missing one is not a miss. AirPatrol measures traffic, and dropping parked cars off the road is part of
    its design, so neither choice is scored. "count" scores them like any vehicle."""
    p = Path(path)
    if not p.exists():
        raise EvalInputError(f"{p}: ground truth not found")
    if p.is_dir():
        candidates = [p / "gt" / "gt.txt", p / "gt.txt"]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            whole = sorted(p.glob("*_gt_whole.txt")) + sorted(p.glob("gt/*_gt_whole.txt"))
            mot = sorted(p.glob("gt/gt_mot.txt")) + sorted(p.glob("gt_mot.txt"))
            found = whole[0] if whole else (mot[0] if mot else None)
        if found is None:
            raise EvalInputError(f"{p}: no ground truth inside (gt/gt.txt, gt.txt or *_gt_whole.txt)")
        p = found
    gt_dir = p.parent
    seq_dir = gt_dir.parent if gt_dir.name == "gt" else gt_dir
    fps, n = read_seqinfo(seq_dir / "seqinfo.ini")
    if fps is None and (seq_dir / "scene.json").is_file():
        try:
            fps = float(json.loads((seq_dir / "scene.json").read_text())["fps"])
        except (ValueError, KeyError, TypeError):
            pass
    if p.name.endswith("_gt_whole.txt"):
        ignore = p.with_name(p.name.replace("_gt_whole.txt", "_gt_ignore.txt"))
        boxes, ign = read_uavdt(p, ignore)
        kind = "uavdt"
    else:
        boxes, conf = read_mot(p)
        keep = conf > 0  # conf 0 marks boxes not to evaluate: they act as ignore regions
        if parked == "ignore":
            keep &= ~np.isin(boxes.ids, sorted(_parked_ids(seq_dir / "scene.json")))
        elif parked != "count":
            raise EvalInputError(f"parked must be 'ignore' or 'count', got {parked!r}")
        ign = boxes.subset(~keep)
        boxes = boxes.subset(keep)
        kind = "mot"
    if len(boxes) == 0:
        raise EvalInputError(f"{p}: no ground-truth boxes")
    gt = GroundTruth(boxes, ign, kind, p, fps=fps, seq_length=n)
    sp = gt_dir / "speeds.csv"
    if sp.is_file():
        gt.speeds, gt.moving = read_speeds(sp)
    if (seq_dir / "road_mask").is_dir():
        gt.road_mask_dir = seq_dir / "road_mask"
    return gt


def _parked_ids(scene_json: Path) -> set[int]:
    """Ids of the parked vehicles of a synthetic scene (empty when there is no scene.json)."""
    if not scene_json.is_file():
        return set()
    try:
        vehicles = json.loads(scene_json.read_text(encoding="utf-8"))["vehicles"]
        return {int(k) for k, v in vehicles.items() if v.get("kind") == "parked"}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise EvalInputError(f"{scene_json}: not a scene.json with a 'vehicles' table") from None


def read_summary(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EvalInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise EvalInputError(f"{path}: expected a JSON object")
    return data
