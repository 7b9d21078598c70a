"""Vehicle detection with an Ultralytics YOLO model, restricted to the road, tiled for small vehicles.

Any weights Ultralytics loads work (``.pt``, ``.onnx``, ``.engine`` ...). The classes of the model are mapped onto
AirPatrol's vehicle classes by name (COCO ``car``/``truck``/``bus`` and our own ``van``); other classes are dropped.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from vision.config import DetectorConfig
from vision.types import VEHICLE_CLASSES, Detections, DetectionSource

# Re-exported: the weights file and its loading moved to vision.yolo_weights (vision.runtime needs them too).
from vision.yolo_weights import (  # noqa: F401
    ANY_HEADING_WEIGHTS,
    DEFAULT_DETECTOR_WEIGHTS,
    WEIGHTS_DIR,
    WeightsError,
    load_yolo,
)

_NAME_MAP = {"car": 0, "truck": 1, "bus": 2, "van": 3, "minibus": 3, "pickup": 0, "vehicle": 0}


class Detector(Protocol):
    """What the pipeline asks of a detector: :class:`VehicleDetector`, or a stand-in (tests, benchmarks)."""

    weights: str
    tiles_run: int

    def detect(
        self, image: np.ndarray, road_mask: np.ndarray | None = None, tiling: bool | None = None
    ) -> Detections: ...

    def reset(self) -> None: ...


@functools.cache
def fp16_predict_args() -> dict[str, object]:
    """Ultralytics' predict argument for FP16 inference: ``quantize=16`` where it has it (8.4 deprecates ``half`` and
    warns on every call), ``half=True`` on the older versions the project allows (>= 8.3)."""
    from ultralytics.cfg import DEFAULT_CFG_DICT

    return {"quantize": 16} if "quantize" in DEFAULT_CFG_DICT else {"half": True}


def resolve_device(device: str) -> str:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA GPU is available on this machine")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def input_shape(height: int, width: int, imgsz: int, step: int) -> tuple[int, int]:
    """The (h, w) the detector runs an image at on CUDA: letterboxed so its long side is ``imgsz`` (the scale the plan
    chose), its short side padded up to a multiple of ``step`` (at most ``imgsz``). Ultralytics' own letterbox pads
    only to its stride (32), so every band height of the scale plan was a new input shape."""
    long_side = max(height, width)

    def side(n: int) -> int:
        if n == long_side:
            return imgsz
        return min(imgsz, int(np.ceil(n * imgsz / long_side / step - 1e-9)) * step)  # never below the scaled side

    return side(height), side(width)


def pass_imgsz(crop_h: int, crop_w: int, scale: float, stride: int = 32) -> int:
    """The long side (input px) of a detector pass over a crop at ``scale``: a multiple of YOLOv8's largest stride, as
    the letterbox pads to it."""
    return max(int(np.ceil(max(crop_h, crop_w) * scale / stride) * stride), stride)


def tile_grid(width: int, height: int, tile: int, overlap: float) -> list[tuple[int, int, int, int]]:
    """Tiles of ``tile`` px covering the frame with at least ``overlap`` shared between neighbours."""

    def starts(length: int) -> list[int]:
        if length <= tile:
            return [0]
        n = int(np.ceil((length - tile) / (tile * (1 - overlap)))) + 1
        return [int(round(i * (length - tile) / (n - 1))) for i in range(n)]

    return [(x, y, min(x + tile, width), min(y + tile, height)) for y in starts(height) for x in starts(width)]


class VehicleDetector:
    scale_log: list[dict]  # frame range x rows -> input scale (summary.json -> detector_scales)
    _open: dict[tuple[int, int], dict]  # scale_log entries still growing
    _last_f: int
    budget_share: float | None  # share of the live CPU budget (max_input_pixels) the last plan used; 'auto' only
    recorded: bool  # a recorded run: recorded_max_input_pixels is the budget
    _row_scales: list[tuple[int, int, float]]  # the last frame's rows (y0, y1) and their input scale

    def __init__(self, config: DetectorConfig, device: str = "cpu"):
        self.config = config
        self.device = resolve_device(device)
        # torch, or a cached ONNX Runtime / OpenVINO export (config.runtime)
        from vision.runtime import load_for_runtime, pixels_per_onnx_pixel

        self.model, path, self.runtime = load_for_runtime(config, self.device, DEFAULT_DETECTOR_WEIGHTS)
        # pixels this runtime detects in the CPU time ONNX Runtime takes for one (the recorded budget's unit)
        self.runtime_pixels = pixels_per_onnx_pixel(self.runtime) if not self.device.startswith("cuda") else 1.0
        self.weights = str(path)
        self.class_map = vehicle_class_map(self.model, self.weights)
        self._is_torch = self.weights.endswith(".pt") or self.runtime in ("onnx", "openvino")  # take whole batches
        # CUDA, PyTorch model: each new input shape costs its first call new cuDNN plans (slow), so shapes are
        # padded into a few (config.cuda_input_step) and warm_up() runs them all once; on the CPU nothing changes
        self._fixed_shapes = (
            self.device.startswith("cuda") and self.weights.endswith(".pt") and self.config.cuda_input_step > 0
        )
        self.warmed_shapes: set[tuple] = set()  # input shapes warm_up() ran
        self.warmed_sizes: set[tuple] = set()  # (width, height, fixed) warm_up() covered
        self.tiles_run = 0
        self._partner: tuple[Any, dict[int, int]] | None = None  # the any-heading detector and its class map, loaded
        # on its first use
        self.reset()

    # -- planning -------------------------------------------------------------------------------------------
    def wants_tiles(self, width: int, height: int) -> bool | None:
        """True/False when the scale is fixed (native / letterboxed); None when 'auto' plans it per row band."""
        mode = self.config.tiling
        if mode != "auto":
            return mode == "on"
        if max(width, height) <= 1.25 * self.config.imgsz and self.config.max_scale <= 1.0:
            return False  # native resolution is hardly more than the letterboxed frame
        return None

    def _measure(self, dets: Detections, min_score: float = 0.4) -> None:
        """Remember the confident vehicles' lengths (frame px) and rows; a box mostly inside a larger one (a roof
        or windscreen boxed inside its car) is a part, not a vehicle, and is not measured."""
        d = dets[dets.score >= min_score]
        if not len(d):
            self._sizes.append(np.zeros((0, 2), np.float32))
            return
        wh = d.wh
        inside = overlap_fraction(d.xyxy, d.xyxy)
        np.fill_diagonal(inside, 0)
        area = wh[:, 0] * wh[:, 1]
        part = ((inside > 0.6) & (area[:, None] < area[None, :])).any(1)
        keep = ~part
        self._sizes.append(np.column_stack([d.centers[keep, 1], wh[keep].max(1)]).astype(np.float32))

    def _plan(self, width: int, height: int) -> list[tuple[int, int, float]]:
        """Row bands (y0, y1, scale). Each band's median vehicle length is brought to ``target_vehicle_px``, but a
        band is downscaled only as far as the band with the smallest vehicles allows: the frame is downscaled where
        all its vehicles are large (low-altitude nadir), and bands of tiny vehicles (far rows of an oblique view) are
        upscaled on their own when ``max_scale`` > 1. Downscaling only the near rows of an oblique view cost recall on
        both oblique sequences (M1303 -1.3, night -1.8 MOTA, docs/detector_scale.md)."""
        cfg = self.config
        sizes = np.concatenate(list(self._sizes)) if self._sizes else np.zeros((0, 2), np.float32)
        lo = cfg.min_scale
        letterbox = min(1.0, cfg.imgsz / max(width, height))
        # a detector that runs every few frames (motion frames between) may cost more per pass
        pixels = self.budget_pixels
        budget = np.floor(8 * letterbox * np.sqrt(pixels * self.budget_frames) + 1e-6) / 8
        if cfg.budget_frame_px and max(width, height) > cfg.budget_frame_px:
            # a frame larger than the reference keeps the reference's share of its pixels: its vehicles are as many
            # pixels long as the reference's are at a proportionally lower altitude, and need the same scale
            ref = min(1.0, cfg.imgsz / cfg.budget_frame_px)
            budget = max(budget, np.floor(8 * ref * np.sqrt(pixels * self.budget_frames) + 1e-6) / 8)
        if max(width, height) <= cfg.native_up_to_px:
            # up to 720p, native is affordable, and below it small vehicles are missed (toll plaza, 720x1280)
            budget = max(budget, 1.0)
        hi = max(lo, min(cfg.max_scale, budget))

        def scale_for(lengths: np.ndarray) -> float:
            if len(lengths) < 3:
                return float(np.clip(1.0, lo, hi))  # nothing measured: native (the probe corrects it)
            s = cfg.target_vehicle_px / float(np.median(lengths))
            return float(np.clip(np.round(s * 8) / 8, lo, hi))  # steps of 1/8: no flicker

        overall = scale_for(sizes[:, 1])
        edges = np.linspace(0, height, cfg.scale_bands + 1).round().astype(int)
        wanted = []
        for y0, y1 in zip(edges[:-1], edges[1:]):
            sel = sizes[(sizes[:, 0] >= y0) & (sizes[:, 0] < y1), 1]
            wanted.append(scale_for(sel) if len(sel) >= 5 else overall)
        floor = max(min(w, 1.0) for w in wanted)  # the smallest vehicles' band sets how far the frame goes down
        bands: list[tuple[int, int, float]] = []
        for y0, y1, w in zip(edges[:-1], edges[1:], wanted):
            s = max(w, floor)
            if bands and bands[-1][2] == s:
                bands[-1] = (bands[-1][0], int(y1), s)
            else:
                bands.append((int(y0), int(y1), s))
        return bands

    def _planned(self, image: np.ndarray, road_mask: np.ndarray | None) -> Detections:
        """Detect with the scale plan; every ``probe_every`` detector frames (and on the first) one extra pass at the
        other end of the range measures vehicles the plan cannot see (tiny ones when it downscales, whole large
        ones when it runs native), so a wrong first choice recovers."""
        h, w = image.shape[:2]
        cfg = self.config
        if self._frames % cfg.probe_every == 0:
            plan = self._plan(w, h)
            if self._frames == 0 or min(s for *_, s in plan) < min(1.0, cfg.max_scale):
                self._measure(self._pass(image, road_mask, 0, h, cfg.max_scale))
            if self._frames == 0 or max(s for *_, s in plan) >= 1.0:
                self._measure(self._predict([image])[0])  # letterboxed to imgsz
        plan = self._plan(w, h)
        letterbox = min(1.0, cfg.imgsz / max(w, h)) ** 2 * w * h
        used = sum((y1 - y0) * w * s * s for y0, y1, s in plan)
        # against the live budget whatever the run: the detector's stride (stride_follows_scale) stays what it was,
        # and a recorded run's larger pass runs as often as a live pass of the same size would
        self.budget_share = used / (cfg.max_input_pixels * letterbox)
        if len(plan) == 1:
            dets = self._pass(image, road_mask, 0, h, plan[0][2])
        else:
            parts, cuts = [], []
            for a, b, s in self._band_rows(plan, h):
                d = self._pass(image, road_mask, a, b, s)
                parts.append(d)
                cuts.append(cut_by_tile_edge(d.xyxy - np.array([0, a, 0, a], np.float32), (0, a, w, b), w, h))
            dets = merge_tiled(Detections.concat(parts), np.concatenate(cuts), self.config.iou)
        self._measure(dets)
        self._log_plan(plan)
        self._row_scales = plan
        self._tiling_now = all(s >= 1.0 for *_, s in plan)
        return dets

    def _band_rows(self, plan: list[tuple[int, int, float]], height: int) -> list[tuple[int, int, float]]:
        """The rows each band of a plan is detected on: grown by a vehicle length of its neighbours, so a vehicle on
        the seam is whole in one band."""
        rows = []
        for i, (y0, y1, s) in enumerate(plan):
            grow = int(np.ceil(self.config.target_vehicle_px / min(s, *(b[2] for b in plan[max(0, i - 1) : i + 2]))))
            rows.append((max(0, y0 - grow), min(height, y1 + grow), s))
        return rows

    def _pass(self, image: np.ndarray, road_mask: np.ndarray | None, y0: int, y1: int, scale: float) -> Detections:
        """Rows y0..y1 of the frame at ``scale`` (input px per frame px), in one pass (tiles beyond single_pass_max)."""
        h, w = image.shape[:2]
        if scale >= 1.0 and y0 == 0 and y1 == h and abs(scale - 1.0) < 1e-6:
            return self._tiled(image, road_mask)  # native: the road crop, or tiles for very large frames
        crop = image[y0:y1]
        self.tiles_run += 1
        dets = self._predict([crop], imgsz=pass_imgsz(crop.shape[0], crop.shape[1], scale))[0]
        if len(dets) and y0:
            dets.xyxy += np.array([0, y0, 0, y0], np.float32)
        return dets

    def _log_plan(self, plan: list[tuple[int, int, float]]) -> None:
        """Run-length record of the plan: frame range x rows -> scale (summary.json -> detector_scales)."""
        f = self.frame_number if self.frame_number is not None else self._frames + 1
        for y0, y1, s in plan:
            last = self._open.get((y0, y1))
            if last is not None and last["scale"] == s and last["frames"][1] >= self._last_f:
                last["frames"][1] = f
                continue
            entry = {"frames": [f, f], "rows": [y0, y1], "scale": s}
            self.scale_log.append(entry)
            self._open[(y0, y1)] = entry
        self._open = {k: v for k, v in self._open.items() if v["frames"][1] == f}
        self._last_f = f

    @property
    def budget_pixels(self) -> float:
        """The CPU budget of one pass ('auto'), in pixels of the frame letterboxed to imgsz: a recorded run's where
        the pipeline says it drives one (``recorded``), else the live one. A recorded run's budget is in ONNX
        Runtime's pixels: a runtime that detects more in the same CPU time (OpenVINO at bfloat16) gets more of them,
        the flight's cost staying what it was; the live budget is left as it was measured (stride and frame shedding
        are tuned to it)."""
        cfg = self.config
        if self.recorded and cfg.recorded_max_input_pixels is not None:
            return max(cfg.max_input_pixels, cfg.recorded_max_input_pixels * self.runtime_pixels)
        return cfg.max_input_pixels

    @property
    def input_scale(self) -> float:
        """The smallest scale the last frame was detected at (input px per frame px)."""
        return self._input_scale

    # -- inference ------------------------------------------------------------------------------------------
    def _predict_args(self, class_map: dict[int, int]) -> dict[str, Any]:
        """Ultralytics ``predict`` arguments every pass shares (this detector's or the any-heading one's classes)."""
        kwargs: dict[str, Any] = dict(
            conf=self.config.conf, iou=self.config.iou, device=self.device, verbose=False, classes=sorted(class_map)
        )
        if self.device.startswith("cuda") and self.config.half:
            kwargs.update(fp16_predict_args())
        return kwargs

    def _predict(self, images: list[np.ndarray], imgsz: int | None = None) -> list[Detections]:
        kwargs = dict(self._predict_args(self.class_map), imgsz=imgsz or self.config.imgsz)
        if self._fixed_shapes:  # a few input shapes (warmed up at the start) rather than one per band height
            size, step = int(imgsz or self.config.imgsz), self.config.cuda_input_step
            shapes = [input_shape(im.shape[0], im.shape[1], size, step) for im in images]
            kwargs.update(imgsz=[max(s[0] for s in shapes), max(s[1] for s in shapes)], rect=False)
        if self._is_torch and self.device.startswith("cuda"):
            results = self.model.predict(images, **kwargs)
        else:
            # One image per call: exported formats are usually built for batch 1, and on the CPU a batch is no faster
            # (ONNX Runtime took 1.14 s for 8 tiles of 640 px as one batch vs 0.49 s one by one, 2 cores).
            results = [self.model.predict(im, **kwargs)[0] for im in images]
        return _to_detections(results, self.class_map)

    def _tiled(self, image: np.ndarray, road_mask: np.ndarray | None) -> Detections:
        """Native resolution: one pass over the road's bounding box when the frame is small enough, else tiles."""
        h, w = image.shape[:2]
        if max(h, w) <= self.config.single_pass_max:
            return self._native_pass(image, road_mask)
        tiles = tile_grid(w, h, self.config.imgsz, self.config.tile_overlap)
        if road_mask is not None:
            tiles = [t for t in tiles if _road_share(road_mask, t) > 0.01]
        self.tiles_run += len(tiles)
        parts = self._predict([image[y1:y2, x1:x2] for x1, y1, x2, y2 in tiles]) if tiles else []
        cuts = [cut_by_tile_edge(d.xyxy, t, w, h) for d, t in zip(parts, tiles)]
        for d, (x1, y1, _, _) in zip(parts, tiles):
            d.xyxy += np.array([x1, y1, x1, y1], np.float32)
        cut = np.concatenate(cuts) if cuts else np.zeros(0, bool)  # aligned with concat(parts): empty parts add nothing
        return merge_tiled(Detections.concat(parts), cut, self.config.iou)

    def _native_pass(self, image: np.ndarray, road_mask: np.ndarray | None) -> Detections:
        """The part of the frame where the road is, in one pass at its own resolution.

        One pass needs fewer pixels than overlapping tiles and cuts no vehicle in two; cropping to the road's bounding
        box (plus a margin, for vehicles on the kerb) is where restricting detection to the road saves compute.
        """
        h, w = image.shape[:2]
        x1, y1, x2, y2 = (
            road_bounding_box(road_mask, self.config.road_margin_px)
            if road_mask is not None and self.config.crop_to_road
            else (0, 0, w, h)
        )
        if x2 <= x1 or y2 <= y1:
            return Detections()
        self.tiles_run += 1
        crop = image[y1:y2, x1:x2]
        stride = 32  # YOLOv8's largest stride: the letterbox pads to a multiple of it
        dets = self._predict([crop], imgsz=int(np.ceil(max(crop.shape[:2]) / stride) * stride))[0]
        if len(dets):
            dets.xyxy += np.array([x1, y1, x1, y1], np.float32)
        return dets

    def detect(self, image: np.ndarray, road_mask: np.ndarray | None = None, tiling: bool | None = None) -> Detections:
        """Vehicles in one frame. ``tiling`` overrides the configured mode (the baseline never tiles)."""
        h, w = image.shape[:2]
        fixed = self.wants_tiles(w, h) if tiling is None else tiling
        if fixed is not None:
            dets = self._tiled(image, road_mask) if fixed else self._predict([image])[0]
            self._native_last = fixed
            self._input_scale = 1.0 if fixed else min(1.0, self.config.imgsz / max(h, w))
            self._row_scales = [(0, h, self._input_scale)]
        else:
            dets = self._planned(image, road_mask)
            self._native_last = self._tiling_now
            self._input_scale = min(s for *_, s in self._plan(w, h))
        self._frames += 1
        dets.source[:] = DetectionSource.DETECTOR
        return dets

    # -- the any-heading detector ------------------------------------------------------------------------------
    def wants_any_heading(self) -> bool:
        """Whether the any-heading detector may run beside this one: with the shipped detector (by default or named),
        or with any detector when the any-heading weights are given."""
        cfg = self.config.any_heading
        shipped = Path(self.config.weights or DEFAULT_DETECTOR_WEIGHTS).resolve() == DEFAULT_DETECTOR_WEIGHTS.resolve()
        return cfg.enabled and (shipped or bool(cfg.weights))

    def _partner_model(self):
        if self._partner is None:
            from vision.runtime import load_for_runtime

            cfg = self.config.model_copy(update={"weights": self.config.any_heading.weights})
            model, path, _ = load_for_runtime(cfg, self.device, ANY_HEADING_WEIGHTS)
            self._partner = (model, vehicle_class_map(model, str(path)))
        return self._partner

    def detect_any_heading(self, image: np.ndarray, around: np.ndarray, dets: Detections) -> Detections:
        """The any-heading detector's boxes near ``around`` (xyxy: where tracks are that ``dets``, this frame's boxes
        of the shipped detector, have no box for), tagged ``DetectionSource.ANY_HEADING``; those a box of ``dets``
        overlaps (IoU >= ``any_heading.new_iou``) are left out. It looks in a square crop around each (``crop_lengths``
        times the box's long side; overlapping crops as one) at the input scale the last frame's plan gave that row:
        a few small passes instead of a second pass over the whole frame."""
        cfg = self.config.any_heading
        h, w = image.shape[:2]
        if not len(around):
            return Detections()
        model, class_map = self._partner_model()
        kwargs = self._predict_args(class_map)
        parts = []
        for x1, y1, x2, y2 in crop_regions(around, cfg.crop_lengths, cfg.min_crop_px, w, h):
            scale = self._scale_at((y1 + y2) / 2)
            crop = image[y1:y2, x1:x2]
            imgsz = pass_imgsz(crop.shape[0], crop.shape[1], scale)
            found = _to_detections(model.predict(crop, imgsz=imgsz, **kwargs), class_map)
            d = found[0][~cut_by_tile_edge(found[0].xyxy, (x1, y1, x2, y2), w, h)]  # a neighbour cut by the crop
            d.xyxy += np.array([x1, y1, x1, y1], np.float32)
            parts.append(d)
            self.any_heading_crops += 1
        new = Detections.concat(parts)
        if len(new) and len(dets):
            from supervision import box_iou_batch  # imported when needed: supervision takes 0.4 s to import

            new = new[box_iou_batch(new.xyxy, dets.xyxy).max(1) < cfg.new_iou]
        new.source[:] = DetectionSource.ANY_HEADING
        self.any_heading_boxes += len(new)
        return new

    def _scale_at(self, row: float) -> float:
        """The input scale the last frame's plan gave this row (1.0 before any frame)."""
        for y0, y1, scale in self._row_scales:
            if y0 <= row < y1:
                return scale
        return self._row_scales[-1][2] if self._row_scales else 1.0

    def detect_crops(self, crops: list[np.ndarray], imgsz: int) -> list[Detections]:
        """Vehicles in small crops cut from a frame (``vision/turned_crops.py``), each seen at ``imgsz``."""
        out = self._predict(crops, imgsz=imgsz)
        for dets in out:
            dets.source[:] = DetectionSource.DETECTOR
        return out

    def reset(self) -> None:
        from collections import deque

        self._frames = 0
        self._tiling_now = False
        self._native_last = self.config.tiling == "on"
        self._input_scale = 1.0
        self.budget_share = None
        # frames until the next detector run, set by the pipeline: the plan's CPU budget (max_input_pixels) is per
        # frame, so a detector that runs every few frames while the motion layer carries the tracks may cost more
        self.budget_frames = 1
        # a recorded run (set by the pipeline): the scale serves recall at the flight's cost, not a live frame rate
        self.recorded = False
        self._row_scales = []  # the last frame's (rows y0, y1, input scale)
        self.any_heading_crops, self.any_heading_boxes = 0, 0  # its crops, and its boxes the shipped one had none for
        self._sizes: deque[np.ndarray] = deque(maxlen=15)  # per detector frame: (row, length px) of vehicles
        self.scale_log = []
        self._open = {}
        self._last_f = 0
        self.frame_number: int | None = None  # the video frame being detected, set by the pipeline

    # -- warm-up (CUDA) ---------------------------------------------------------------------------------------
    def _possible_plans(self, width: int, height: int) -> set[tuple[tuple[int, int, float], ...]]:
        """Every plan ``_plan`` can return for this frame size: it is asked with made-up vehicle lengths, one median
        per band, over every combination of the scales it can choose (so the rule stays in ``_plan`` alone)."""
        from collections import deque

        bands = self.config.scale_bands
        centres = (np.arange(bands) + 0.5) * height / bands
        saved = self._sizes

        def plan_for(lengths) -> tuple[tuple[int, int, float], ...]:
            rows = [(c, n) for c, n in zip(centres, lengths) for _ in range(20)]
            self._sizes = deque([np.array(rows, np.float32).reshape(-1, 2)])
            return tuple(self._plan(width, height))

        try:
            by_scale: dict[float, float] = {}  # scale -> a vehicle length that gives it
            for length in np.geomspace(1.0, max(width, height), 600):
                by_scale.setdefault(plan_for([length] * bands)[0][2], float(length))
            choices = list(by_scale.values())
            combos = itertools.product(choices, repeat=bands) if len(choices) ** bands <= 4096 else []
            plans = {plan_for(list(c)) for c in combos} | {plan_for([n] * bands) for n in choices}
            self._sizes = deque()
            plans.add(tuple(self._plan(width, height)))  # nothing measured yet: the first frame's plan
        finally:
            self._sizes = saved
        return plans

    def warm_up_passes(self, width: int, height: int, fixed: bool | None = None) -> dict[tuple, tuple]:
        """Input shape -> one detector pass that runs at it, for every shape a run on ``width`` x ``height`` frames can
        use: the scale plan's bands, the probe passes, or the fixed mode's one pass (``fixed``: as ``detect``'s
        ``tiling``). A pass is ('letterbox',), ('tiles',) or (y0, y1, scale) of ``_pass``."""
        step, imgsz = self.config.cuda_input_step or 32, self.config.imgsz
        passes: list[tuple] = []
        fixed = self.wants_tiles(width, height) if fixed is None else fixed
        if fixed is False:
            passes.append(("letterbox",))
        elif fixed is True:
            passes.append((0, height, 1.0))
        else:
            passes += [("letterbox",), (0, height, self.config.max_scale)]  # the probes
            for plan in sorted(self._possible_plans(width, height)):
                passes += [(0, height, plan[0][2])] if len(plan) == 1 else self._band_rows(list(plan), height)
        out: dict[tuple, tuple] = {}
        for p in passes:
            key: tuple
            if p[0] == "letterbox":
                key = input_shape(height, width, imgsz, step)
            elif (
                abs(p[2] - 1.0) < 1e-6
                and p[0] == 0
                and p[1] == height
                and max(width, height) > self.config.single_pass_max
            ):
                key = ("tiles",)
            else:
                y0, y1, s = p
                key = input_shape(y1 - y0, width, pass_imgsz(y1 - y0, width, s), step)
            out.setdefault(key, p)
        return out

    def warm_up(self, width: int, height: int, fixed: bool | None = None) -> int:
        """Run the model once at every input shape a run on ``width`` x ``height`` frames can use, so a stream's first
        seconds do not pay each new shape's first CUDA call (new cuDNN plans: the last H200 call ran a 1080p clip's
        first 30 frames at 4.6 fps, its warm loop at 41). CUDA only, with shapes padded into a few
        (``cuda_input_step``); on the CPU it would only cost. Returns the number of passes run."""
        if not self._fixed_shapes or (width, height, fixed) in self.warmed_sizes:
            return 0
        image = np.zeros((height, width, 3), np.uint8)
        tiles_run, n = self.tiles_run, 0
        for key, p in self.warm_up_passes(width, height, fixed).items():
            if key in self.warmed_shapes:
                continue
            if p[0] == "letterbox":
                self._predict([image])
            else:
                self._pass(image, None, *p)
            self.warmed_shapes.add(key)
            n += 1
        self.tiles_run = tiles_run
        self.warmed_sizes.add((width, height, fixed))
        return n

    @property
    def tiling_active(self) -> bool:
        """Whether the last frame was detected at native resolution (one pass or tiles)."""
        return self._native_last


def vehicle_class_map(model, weights: str) -> dict[int, int]:
    """The model's class ids that are vehicles -> AirPatrol's class ids (by name); a model with none is an error."""
    names = model.names if isinstance(model.names, dict) else dict(enumerate(model.names))
    class_map = {int(k): _NAME_MAP[v.lower()] for k, v in names.items() if v.lower() in _NAME_MAP}
    if not class_map:
        raise WeightsError(f"{weights}: model has no vehicle classes (names: {list(names.values())[:8]}...)")
    return class_map


def _to_detections(results, class_map: dict[int, int]) -> list[Detections]:
    """Ultralytics results as Detections, the model's classes mapped onto ours."""
    out = []
    for r in results:
        b = r.boxes
        if b is None or len(b) == 0:
            out.append(Detections())
            continue
        cls = b.cls.cpu().numpy().astype(int)
        out.append(Detections(b.xyxy.cpu().numpy(), b.conf.cpu().numpy(), np.array([class_map[c] for c in cls])))
    return out


def crop_regions(
    boxes: np.ndarray, lengths: float, min_px: int, width: int, height: int
) -> list[tuple[int, int, int, int]]:
    """Square crops (x1, y1, x2, y2) centred on ``boxes`` (xyxy), ``lengths`` times each box's long side (at least
    ``min_px``), inside the frame; crops that overlap are merged into their bounding box until none overlap."""
    regions: list[list[int]] = []
    for x1, y1, x2, y2 in np.asarray(boxes, np.float32).reshape(-1, 4):
        half = max(lengths * max(x2 - x1, y2 - y1), min_px) / 2
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        r = [
            max(0, int(cx - half)),
            max(0, int(cy - half)),
            min(width, int(np.ceil(cx + half))),
            min(height, int(np.ceil(cy + half))),
        ]
        if r[2] > r[0] and r[3] > r[1]:
            regions.append(r)
    merged = True
    while merged:
        merged = False
        for i, j in itertools.combinations(range(len(regions)), 2):
            a, b = regions[i], regions[j]
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                regions[i] = [min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])]
                del regions[j]
                merged = True
                break
    return [(r[0], r[1], r[2], r[3]) for r in regions]


def road_bounding_box(road_mask: np.ndarray, margin: int) -> tuple[int, int, int, int]:
    """xyxy of the road pixels, grown by ``margin`` and clipped to the frame; an empty box when there is no road."""
    h, w = road_mask.shape[:2]
    rows = np.flatnonzero(road_mask.any(axis=1))
    if not len(rows):
        return 0, 0, 0, 0
    cols = np.flatnonzero(road_mask.any(axis=0))
    return (
        max(0, int(cols[0]) - margin),
        max(0, int(rows[0]) - margin),
        min(w, int(cols[-1]) + 1 + margin),
        min(h, int(rows[-1]) + 1 + margin),
    )


def overlap_fraction(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection area over the area of each box in ``a`` (xyxy; len(a) x len(b))."""
    ix = (np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])).clip(0)
    iy = (np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])).clip(0)
    area = ((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]))[:, None]
    return ix * iy / np.maximum(area, 1e-6)


def _road_share(mask: np.ndarray, tile: tuple[int, int, int, int]) -> float:
    x1, y1, x2, y2 = tile
    sub = mask[y1:y2, x1:x2]
    return float(np.count_nonzero(sub)) / max(1, sub.size)


def cut_by_tile_edge(
    xyxy: np.ndarray, tile: tuple[int, int, int, int], width: int, height: int, margin: float = 3.0
) -> np.ndarray:
    """Which boxes (tile coordinates) touch an edge of the tile that lies inside the frame: possibly cut vehicles."""
    x1, y1, x2, y2 = tile
    b = np.asarray(xyxy, np.float32).reshape(-1, 4)
    cut = np.zeros(len(b), bool)
    if x1 > 0:
        cut |= b[:, 0] <= margin
    if y1 > 0:
        cut |= b[:, 1] <= margin
    if x2 < width:
        cut |= b[:, 2] >= (x2 - x1) - margin
    if y2 < height:
        cut |= b[:, 3] >= (y2 - y1) - margin
    return cut


def merge_tiled(dets: Detections, cut: np.ndarray, iou: float, min_ios: float = 0.5) -> Detections:
    """Join the per-tile detections into one set for the frame.

    Plain NMS is not enough: a vehicle crossing a tile border is seen whole in one tile and as a fragment in the
    other, and the fragment's IoU with the whole box is low (a third of a car gives IoU ~0.33), so NMS keeps both:
    one vehicle, two boxes, the fragment a false positive. So a box that touches an inner tile edge (``cut``) and
    lies mostly inside another box (intersection over its own area >= ``min_ios``) is merged into that box (their
    union: when a long vehicle is cut in both tiles, the two fragments together are the vehicle). SAHI's
    greedy non-maximum merging with the IoS metric does the same for all boxes; limiting it to cut boxes keeps two
    close vehicles that are whole in their tiles apart.
    """
    cut = np.asarray(cut, bool).reshape(len(dets))
    if len(dets) < 2:
        return dets
    keep = np.sort(_nms_indices(dets, iou))
    dets, cut = dets[keep], cut[keep]
    xyxy = dets.xyxy.copy()
    score = dets.score.copy()
    alive = np.ones(len(dets), bool)
    area = np.maximum(xyxy[:, 2] - xyxy[:, 0], 0) * np.maximum(xyxy[:, 3] - xyxy[:, 1], 0)
    for i in np.flatnonzero(cut)[np.argsort(area[cut])]:  # smallest fragments first
        others = np.flatnonzero(alive)
        others = others[others != i]
        if not len(others):
            break
        ix = np.clip(np.minimum(xyxy[others, 2], xyxy[i, 2]) - np.maximum(xyxy[others, 0], xyxy[i, 0]), 0, None)
        iy = np.clip(np.minimum(xyxy[others, 3], xyxy[i, 3]) - np.maximum(xyxy[others, 1], xyxy[i, 1]), 0, None)
        ios = ix * iy / np.maximum(np.minimum(area[others], area[i]), 1e-6)
        if ios.max() < min_ios:
            continue
        j = others[ios.argmax()]
        xyxy[j, :2] = np.minimum(xyxy[j, :2], xyxy[i, :2])
        xyxy[j, 2:] = np.maximum(xyxy[j, 2:], xyxy[i, 2:])
        area[j] = (xyxy[j, 2] - xyxy[j, 0]) * (xyxy[j, 3] - xyxy[j, 1])
        if score[i] > score[j]:
            score[j], dets.class_id[j] = score[i], dets.class_id[i]
        alive[i] = False
    merged = Detections(xyxy, score, dets.class_id, dets.source, dets.moving)
    return merged[alive]


def _nms_indices(dets: Detections, iou: float) -> np.ndarray:
    import torch
    from torchvision.ops import nms

    return nms(torch.from_numpy(dets.xyxy).float(), torch.from_numpy(dets.score).float(), iou).numpy()


def class_name(class_id: int) -> str:
    return VEHICLE_CLASSES[class_id] if 0 <= class_id < len(VEHICLE_CLASSES) else str(class_id)
