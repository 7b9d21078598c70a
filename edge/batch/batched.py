"""One detector call for many frames: within a video (``BatchedPipeline``) and across live streams (``step_streams``).

Across streams (``step_streams``, and ``StreamBatcher`` for the service's stream threads) every stream steps in its
own thread, in parallel, and the models' calls meet in shared forward passes (``edge.batch.shared_pass``): the
detector (whole frames, native-resolution passes, tiles) and the road U-Net. That is exact - nothing is guessed.
With the torch ego-motion backend the streams' ego-motion and motion-layer steps meet the same way: one
``update_streams`` call per (stage, device, frame size, settings) group instead of one ``update`` per stream.

Within one video the frames depend on each other, so the detector's work for a batch of frames is foreseen instead.
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

import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, cast

import numpy as np

from edge.batch.shared_pass import MAX_MODEL_BATCH, SharedPasses
from tracking.pipeline import Pipeline
from tracking.types import FrameResult
from vision.detection import VehicleDetector, _road_share, road_bounding_box, tile_grid
from vision.types import Detections, Frame

NATIVE_STRIDE = 32  # YOLOv8's largest stride: a native pass's input size is the crop's long side rounded up to it


def _key(image: np.ndarray, imgsz: int | None = None) -> tuple:
    """The cache key of one detector input: the image buffer, and the input size it is run at (None: config.imgsz)."""
    return image.__array_interface__["data"][0], image.shape, image.strides, imgsz


def _native_imgsz(crop: np.ndarray) -> int:
    return int(np.ceil(max(crop.shape[:2]) / NATIVE_STRIDE) * NATIVE_STRIDE)


class _PredictionCache:
    """Stands in for ``VehicleDetector._predict`` during a batch: answers prefetched images, runs the rest."""

    def __init__(self, detector: VehicleDetector):
        self.detector = detector
        self.real = detector._predict  # the bound method of the class
        self.store: dict[tuple, Detections] = {}
        self.hits = self.misses = 0

    def __call__(self, images: list[np.ndarray], imgsz: int | None = None) -> list[Detections]:
        found = [self.store.pop(_key(im, imgsz), None) for im in images]
        missing = [im for im, d in zip(images, found) if d is None]
        if missing:
            computed = iter(self.real(missing) if imgsz is None else self.real(missing, imgsz=imgsz))
            found = [d if d is not None else next(computed) for d in found]
        self.hits += len(images) - len(missing)
        self.misses += len(missing)
        return cast(list[Detections], found)  # every None was filled above


def _model(pipeline: Pipeline) -> VehicleDetector:
    """The pipeline's detector: batching drives the real model (its _predict, settings and tiling plan)."""
    det = pipeline.detector
    assert isinstance(det, VehicleDetector)
    return det


def _signature(det: VehicleDetector, shape: tuple, imgsz: int | None = None) -> tuple:
    """Detectors with equal signatures give the same answer for the same image: one forward pass serves them all."""
    c = det.config
    return (det.weights, det.device, c.imgsz, c.conf, c.iou, c.half, tuple(sorted(det.class_map)), shape, imgsz)


def _planned_images(pipeline: Pipeline, frames: list[Frame]) -> list[tuple[np.ndarray, int | None]]:
    """The images ``pipeline`` will most likely give its detector for ``frames`` (in order, from its current state),
    each with the input size it will be run at (None: the configured imgsz; a number: a native-resolution pass)."""
    det = _model(pipeline)
    cfg = det.config
    road = getattr(pipeline.road, "mask", None) if pipeline.road is not None else None  # the last frame's
    counter, tiling_now = getattr(det, "_frames", 0), getattr(det, "_tiling_now", False)
    dual = not pipeline.config.baseline
    coast = getattr(pipeline, "_until_detect", 0) if dual else 0  # frames the detector skips (detector.every_n_frames)
    stride = pipeline._detector_stride() if dual and hasattr(pipeline, "_fed_by") else 1
    out: list[tuple[np.ndarray, int | None]] = []
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
            out.append((img, None))
        if not tiled:
            continue
        known_road = road is not None and road.shape[:2] == (h, w)
        if max(h, w) <= cfg.single_pass_max:  # one native pass over the frame, or over the road's bounding box
            x1, y1, x2, y2 = (0, 0, w, h)
            if (
                cfg.crop_to_road and known_road and road is not None
            ):  # this frame's road is not known yet: the last one is a good guess
                x1, y1, x2, y2 = road_bounding_box(road, cfg.road_margin_px)
            if x2 > x1 and y2 > y1:
                crop = img[y1:y2, x1:x2]
                out.append((crop, _native_imgsz(crop)))
            continue
        for x1, y1, x2, y2 in tile_grid(w, h, cfg.imgsz, cfg.tile_overlap):
            # the road mask of the frame is not known yet: the last one is a good guess (misses just run late)
            if not known_road or road is None or _road_share(road, (x1, y1, x2, y2)) > 0.01:
                out.append((img[y1:y2, x1:x2], None))
    return out


def _prefetch(work: list[tuple[Pipeline, list[Frame]]], max_batch: int) -> dict[int, _PredictionCache]:
    caches: dict[int, _PredictionCache] = {}
    groups: dict[tuple, list[tuple[_PredictionCache, np.ndarray]]] = defaultdict(list)
    share: dict[int, int] = defaultdict(int)  # images per pipeline: its part of the prefetch time
    for pipeline, frames in work:
        det = _model(pipeline)
        cache = caches.setdefault(id(det), _PredictionCache(det))
        for im, imgsz in _planned_images(pipeline, frames):
            groups[_signature(det, im.shape, imgsz)].append((cache, im))
            share[id(pipeline)] += 1
    t0 = time.perf_counter()
    for sig, members in groups.items():
        run, imgsz = members[0][0].real, sig[-1]  # any detector of the group: same model, same settings
        for i in range(0, len(members), max_batch):
            chunk = members[i : i + max_batch]
            images = [im for _, im in chunk]
            for (cache, im), dets in zip(chunk, run(images) if imgsz is None else run(images, imgsz=imgsz)):
                cache.store[_key(im, imgsz)] = dets
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


# -- across streams: parallel steps, shared forward passes -------------------------------------------------------


class _RoutedUNet:
    """Stands in for a road segmenter's U-Net during a step: its forward call goes through the shared passes."""

    def __init__(self, model, key: tuple, device: str, shared: SharedPasses):
        self.model, self.key, self.device, self.shared = model, key, device, shared

    def __call__(self, x):
        return self.shared.run([(self.key + (tuple(x.shape),), self._forward, x)])[0]

    def _forward(self, xs: list) -> list:
        import torch

        with torch.inference_mode():  # grad mode is per thread: the pass may run in another stream's thread
            if not self.device.startswith("cuda"):
                return [self.model(x) for x in xs]  # one by one: no faster batched on a CPU, and bit-identical
            with torch.autocast("cuda", dtype=torch.float16):
                out = self.model(torch.cat(xs))
            return list(out.float().split(1))


def _detector_pass(det: VehicleDetector, imgsz: int | None):
    real = type(det)._predict.__get__(det)  # the class's method, whatever stands in for it on the instance

    def run(images: list[np.ndarray]) -> list[Detections]:
        return real(images) if imgsz is None else real(images, imgsz=imgsz)

    return run


def _ego_pass(items: list[tuple[Any, Any, np.ndarray | None]]) -> list:
    """One shared ego-motion step: items are (estimator, grey, boxes to exclude), one per stream."""
    from vision.gpu.ego_motion import update_streams

    ests, greys, excludes = zip(*items)
    return update_streams(list(ests), list(greys), list(excludes))


def _motion_pass(items: list[tuple]) -> list:
    """One shared motion-layer step: items are (detector, grey, H, scale, road mask, frames elapsed)."""
    from vision.gpu.motion import update_streams

    dets, greys, Hs, scales, roads, elapsed = zip(*items)
    return update_streams(list(dets), list(greys), list(Hs), list(scales), list(roads), list(elapsed))


def stage_settings(stage: Any) -> str:
    """``stage.config`` as the JSON that goes into its shared-pass key, serialised once per config object.

    Streams step every frame and this was serialised on each step (a pydantic dump per stage and stream, ~tens of
    microseconds each); the config of a stage does not change while it runs, and where a new config object is set
    the cache sees a different object and serialises that.
    """
    config = stage.config
    cached = stage.__dict__.get("_shared_pass_settings")
    if cached is None or cached[0] is not config:
        cached = stage.__dict__["_shared_pass_settings"] = (config, config.model_dump_json())
    return cached[1]


def _route_motion_stages(pipeline: Pipeline, shared: SharedPasses) -> list[Any]:
    """Shadow the torch ego-motion / motion stages' ``update`` on the instances so the call goes through ``shared``
    (the OpenCV backend steps on its own); returns the shadowed objects, for the caller to restore."""
    # modules not imported yet: no pipeline holds a torch stage (and torch need not be loaded to find that out)
    ego_mod, motion_mod = sys.modules.get("vision.gpu.ego_motion"), sys.modules.get("vision.gpu.motion")
    routed: list[Any] = []
    ego, motion = pipeline.ego, pipeline.motion
    if ego_mod is not None and type(ego) is ego_mod.TorchEgoMotionEstimator:
        # register() of a group uses its first member's config and the scale it is given: both in the key
        ego_settings = stage_settings(ego)

        def ego_update(grey_small, exclude_xyxy: np.ndarray | None = None):
            key = ("ego-motion", str(grey_small.device), tuple(grey_small.shape), ego.scale, ego_settings)
            return shared.run([(key, _ego_pass, (ego, grey_small, exclude_xyxy))])[0]

        ego.update = ego_update  # shadows the class's method on this instance only
        routed.append(ego)
    if motion_mod is not None and type(motion) is motion_mod.TorchMotionDetector:
        motion_settings = stage_settings(motion)

        def motion_update(grey_small, H_prev_to_cur_small, scale, road_mask_small=None, frames_elapsed=1):
            shape = tuple(getattr(grey_small, "shape", ()))
            key = ("motion", str(motion.device), shape, motion_settings)
            item = (motion, grey_small, H_prev_to_cur_small, scale, road_mask_small, frames_elapsed)
            return shared.run([(key, _motion_pass, item)])[0]

        motion.update = motion_update
        routed.append(motion)
    return routed


@contextmanager
def routed_through(pipeline: Pipeline, shared: SharedPasses) -> Iterator[None]:
    """While inside, ``pipeline``'s detector and road U-Net calls (and the torch backend's ego-motion and motion
    steps) go through ``shared`` (instance attributes that shadow the method / the model for this step only)."""
    det = _model(pipeline)
    runners: dict[int | None, Callable[[list[np.ndarray]], list[Detections]]] = {}

    def predict(images: list[np.ndarray], imgsz: int | None = None) -> list[Detections]:
        run = runners.get(imgsz) or runners.setdefault(imgsz, _detector_pass(det, imgsz))
        return shared.run([(_signature(det, im.shape, imgsz), run, im) for im in images])

    road = pipeline.road
    unet = getattr(road, "_model", None) if road is not None else None
    det._predict = predict  # type: ignore[method-assign]  # shadows the class's method on this instance only
    if unet is not None and road is not None:
        road._model = _RoutedUNet(
            unet, ("road-unet", str(road.config.weights), road.device, road._long_side), road.device, shared
        )  # type: ignore[assignment]  # a stand-in with its call
    stages = _route_motion_stages(pipeline, shared)
    try:
        yield
    finally:
        det.__dict__.pop("_predict", None)
        for stage in stages:
            stage.__dict__.pop("update", None)
        if unet is not None and road is not None:
            road._model = unet


def _units(pipelines: list[Pipeline]) -> list[list[int]]:
    """Pipelines that share a detector or road object cannot step at the same time: one unit of work each group."""
    owner: dict[int, int] = {}
    units: dict[int, list[int]] = {}
    for i, p in enumerate(pipelines):
        objs = [id(p.detector)] + ([id(p.road)] if p.road is not None else [])
        unit = next((owner[o] for o in objs if o in owner), i)
        for o in objs:
            owner[o] = unit
        units.setdefault(unit, []).append(i)
    return list(units.values())


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _executor(n: int) -> ThreadPoolExecutor:
    """One pool for the process, as wide as the most streams ever stepped together (they all wait on each other
    in the shared passes, so each needs a thread of its own)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(max_workers=n, thread_name_prefix="airpatrol-stream"), n
        return _pool


def step_streams(
    pipelines: list[Pipeline], frames: list[Frame], max_model_batch: int = MAX_MODEL_BATCH, parallel: bool = True
) -> list[FrameResult]:
    """One step of several live streams: ``frames[i]`` is the next frame of ``pipelines[i]``.

    Every stream steps in its own thread (``parallel=False``: one after another, the same results); the detector
    and road U-Net calls of all streams meet in shared forward passes. Pipelines with the same weights and settings
    share each pass, even if every stream loaded its own copy of the model; inputs of different sizes go in separate
    passes (letterboxing must not change).
    """
    if len(pipelines) != len(frames):
        raise ValueError(f"step_streams: {len(pipelines)} pipelines but {len(frames)} frames")
    if len({id(p) for p in pipelines}) != len(pipelines):
        raise ValueError("step_streams: a pipeline appears twice; use BatchedPipeline for frames of one stream")
    if not pipelines:
        return []
    shared = SharedPasses(window_s=None, max_batch=max_model_batch)
    units = _units(pipelines)
    results: list[FrameResult | None] = [None] * len(pipelines)

    def step_unit(indices: list[int]) -> None:
        try:
            for i in indices:
                with routed_through(pipelines[i], shared):
                    results[i] = pipelines[i].step(frames[i])
        finally:
            shared.leave()  # the others stop waiting for this unit

    if not parallel:
        for unit in units:  # one at a time: each shared pass holds one stream's images
            shared.enter()
            step_unit(unit)
        return results  # type: ignore[return-value]
    shared.enter(len(units))  # all at once: a pass waits until every unit is waiting or done
    if len(units) == 1:
        step_unit(units[0])
        return results  # type: ignore[return-value]
    futures = [_executor(len(units)).submit(step_unit, unit) for unit in units]
    errors = [f.exception() for f in futures]
    for exc in errors:
        if exc is not None:
            raise exc
    return results  # type: ignore[return-value]


class StreamBatcher:
    """The service's stepper (``WorkerDeps.step``): each stream steps in its own worker thread, as before, and the
    model calls of the streams stepping at the same moment meet in shared forward passes. A stream waits at most
    ``window_s`` for the others before its pass runs without them."""

    def __init__(self, window_s: float = 0.010, max_model_batch: int = MAX_MODEL_BATCH):
        self.shared = SharedPasses(window_s=window_s, max_batch=max_model_batch)

    def step(self, pipeline: Pipeline, frame: Frame) -> FrameResult:
        with routed_through(pipeline, self.shared):
            self.shared.enter()
            try:
                return pipeline.step(frame)
            finally:
                self.shared.leave()
