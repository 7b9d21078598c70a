"""One detector call for many frames: within a video (``BatchedPipeline``) and across live streams (``step_streams``).

The pipeline's stages after ego-motion depend on each other frame by frame (the tracker, the road mask, the speed
filter), but the detector is a pure function of the pixels it is given. So a batch is run in two passes:

1. **prefetch** - every image the detector will be asked for in the batch (whole frames, or tiles of them) goes
   through the model in one ``_predict`` call per (model, image size) group - this is where a GPU earns its keep;
2. **step** - each pipeline steps through its frames in order as usual; its detector finds the answers waiting in a
   cache keyed by the image buffer (address, shape, strides) instead of running the model.

Results are therefore the same as stepping frame by frame (up to the last bits of float arithmetic that batched
convolutions may change), whatever the tiling mode: an image the prefetch did not foresee (a tile that became road
during the batch, the 'auto' tiling decision flipping at a probe frame) is simply a cache miss and runs on its own.
Prefetch planning reads two private fields of the detector (frame counter, tiling state) and the road layer's last
mask; they only decide what is worth prefetching, never what the result is.
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import cast

import numpy as np

from tracking.pipeline import Pipeline
from tracking.types import FrameResult
from vision.detection import VehicleDetector, _road_share, tile_grid
from vision.types import Detections, Frame

MAX_MODEL_BATCH = 32  # images per forward pass; bounds GPU memory whatever the batch or number of streams


def _key(image: np.ndarray) -> tuple:
    return image.__array_interface__["data"][0], image.shape, image.strides


class _PredictionCache:
    """Stands in for ``VehicleDetector._predict`` during a batch: answers prefetched images, runs the rest."""

    def __init__(self, detector: VehicleDetector):
        self.detector = detector
        self.real = detector._predict  # the bound method of the class
        self.store: dict[tuple, Detections] = {}
        self.hits = self.misses = 0

    def __call__(self, images: list[np.ndarray], imgsz: int | None = None) -> list[Detections]:
        if imgsz is not None:  # a native-resolution pass: never prefetched (its size follows the road mask)
            self.misses += len(images)
            return self.real(images, imgsz=imgsz)
        found = [self.store.pop(_key(im), None) for im in images]
        missing = [im for im, d in zip(images, found) if d is None]
        if missing:
            computed = iter(self.real(missing))
            found = [d if d is not None else next(computed) for d in found]
        self.hits += len(images) - len(missing)
        self.misses += len(missing)
        return cast(list[Detections], found)  # every None was filled above


def _model(pipeline: Pipeline) -> VehicleDetector:
    """The pipeline's detector: batching drives the real model (its _predict, settings and tiling plan)."""
    det = pipeline.detector
    assert isinstance(det, VehicleDetector)
    return det


def _signature(det: VehicleDetector, shape: tuple) -> tuple:
    """Detectors with equal signatures give the same answer for the same image: one forward pass serves them all."""
    c = det.config
    return (det.weights, det.device, c.imgsz, c.conf, c.iou, c.half, tuple(sorted(det.class_map)), shape)


def _planned_images(pipeline: Pipeline, frames: list[Frame]) -> list[np.ndarray]:
    """The images ``pipeline`` will most likely give its detector for ``frames`` (in order, from its current state)."""
    det = _model(pipeline)
    cfg = det.config
    road = getattr(pipeline.road, "mask", None) if pipeline.road is not None else None  # the last frame's
    counter, tiling_now = getattr(det, "_frames", 0), getattr(det, "_tiling_now", False)
    dual = not pipeline.config.baseline
    coast = getattr(pipeline, "_until_detect", 0) if dual else 0  # frames the detector skips (detector.every_n_frames)
    stride = pipeline._detector_stride() if dual and hasattr(pipeline, "_fed_by") else 1
    out: list[np.ndarray] = []
    detector_calls = 0
    for frame in frames:
        if coast > 0:
            coast -= 1
            continue
        coast = stride - 1
        k = detector_calls
        detector_calls += 1
        img = frame.image
        h, w = img.shape[:2]
        fixed = False if pipeline.config.baseline else det.wants_tiles(w, h)
        probe = fixed is None and (counter + k) % cfg.probe_every == 0
        whole = fixed is False or probe or (fixed is None and not tiling_now)
        tiled = fixed is True or probe or (fixed is None and tiling_now)
        if whole:
            out.append(img)
        if tiled and max(h, w) > cfg.single_pass_max:  # a native single pass has its own input size: not prefetched, it runs on its own
            for x1, y1, x2, y2 in tile_grid(w, h, cfg.imgsz, cfg.tile_overlap):
                # the road mask of the frame is not known yet: the last one is a good guess (misses just run late)
                if road is None or road.shape[:2] != (h, w) or _road_share(road, (x1, y1, x2, y2)) > 0.01:
                    out.append(img[y1:y2, x1:x2])
    return out


def _prefetch(work: list[tuple[Pipeline, list[Frame]]], max_batch: int) -> dict[int, _PredictionCache]:
    caches: dict[int, _PredictionCache] = {}
    groups: dict[tuple, list[tuple[_PredictionCache, np.ndarray]]] = defaultdict(list)
    share: dict[int, int] = defaultdict(int)  # images per pipeline: its part of the prefetch time
    for pipeline, frames in work:
        det = _model(pipeline)
        cache = caches.setdefault(id(det), _PredictionCache(det))
        for im in _planned_images(pipeline, frames):
            groups[_signature(det, im.shape)].append((cache, im))
            share[id(pipeline)] += 1
    t0 = time.perf_counter()
    for members in groups.values():
        run = members[0][0].real  # any detector of the group: same model, same settings
        for i in range(0, len(members), max_batch):
            chunk = members[i:i + max_batch]
            for (cache, im), dets in zip(chunk, run([im for _, im in chunk])):
                cache.store[_key(im)] = dets
    ms = (time.perf_counter() - t0) * 1000
    total = sum(share.values()) or 1
    for pipeline, _ in work:  # the stage timings of the summary keep counting detection where it happened
        pipeline.timings["detect"] += ms * share[id(pipeline)] / total
    return caches


def _step_with_caches(work: list[tuple[Pipeline, Frame]], max_batch: int) -> list[FrameResult]:
    per_pipeline: dict[int, tuple[Pipeline, list[Frame]]] = {}
    for pipeline, frame in work:
        per_pipeline.setdefault(id(pipeline), (pipeline, []))[1].append(frame)
    for pipeline, frames in per_pipeline.values():
        if pipeline._size is None:  # first frame ever: the pipeline sizes itself as step() would
            h, w = frames[0].image.shape[:2]
            pipeline.reset(w, h, 25.0)
    caches = _prefetch(list(per_pipeline.values()), max_batch)
    detectors = {id(p.detector): _model(p) for p, _ in per_pipeline.values()}
    try:
        for key, det in detectors.items():
            det._predict = caches[key]  # type: ignore[method-assign]  # instance attribute shadows the method for this batch only
        return [pipeline.step(frame) for pipeline, frame in work]
    finally:
        for det in detectors.values():
            det.__dict__.pop("_predict", None)


class BatchedPipeline:
    """Wraps a ``Pipeline``: ``batch_step(frames)`` = ``[pipeline.step(f) for f in frames]`` with one detector call."""

    def __init__(self, pipeline: Pipeline, max_model_batch: int = MAX_MODEL_BATCH):
        self.pipeline = pipeline
        self.max_model_batch = max_model_batch

    def batch_step(self, frames: list[Frame]) -> list[FrameResult]:
        """Consecutive frames of one video, in order."""
        return _step_with_caches([(self.pipeline, f) for f in frames], self.max_model_batch)

    def run(self, frames: Iterable[Frame], batch_size: int) -> Iterator[FrameResult]:
        """Results of ``frames`` in order, computed ``batch_size`` frames at a time."""
        batch: list[Frame] = []
        for frame in frames:
            batch.append(frame)
            if len(batch) >= batch_size:
                yield from self.batch_step(batch)
                batch = []
        if batch:
            yield from self.batch_step(batch)


def step_streams(pipelines: list[Pipeline], frames: list[Frame], max_model_batch: int = MAX_MODEL_BATCH) -> list[FrameResult]:
    """One step of several live streams: ``frames[i]`` is the next frame of ``pipelines[i]``.

    For the edge service: collect the newest frame of every stream, call this, hand each result to its stream's
    sinks. Pipelines with the same weights and detector settings share each forward pass, even if every stream
    loaded its own copy of the model; frames of different sizes go in separate passes (letterboxing must not change).
    """
    if len(pipelines) != len(frames):
        raise ValueError(f"step_streams: {len(pipelines)} pipelines but {len(frames)} frames")
    if len({id(p) for p in pipelines}) != len(pipelines):
        raise ValueError("step_streams: a pipeline appears twice; use BatchedPipeline for frames of one stream")
    return _step_with_caches(list(zip(pipelines, frames)), max_model_batch)
