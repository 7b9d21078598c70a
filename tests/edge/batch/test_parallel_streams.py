"""Streams stepped in parallel threads with shared forward passes give exactly the tracks of each stream alone.

The full dual layer: road U-Net on, native-resolution detection (the pass the old prefetch could not foresee), the
detector every frame so every step has a pass to share.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from edge.batch.batched import StreamBatcher, step_streams
from tests.edge.batch.test_batched import same_results
from tracking.config import PipelineConfig
from tracking.pipeline import Pipeline
from vision.source import open_source
from vision.types import Frame

N_FRAMES = 6


@pytest.fixture(scope="module")
def feeds(detector_video) -> list[list[Frame]]:
    """Three different streams from one clip: as it is, mirrored, upside down."""
    with open_source(detector_video, max_frames=N_FRAMES) as src:
        frames = list(src)
    flips = [lambda im: im, lambda im: im[:, ::-1], lambda im: im[::-1]]
    return [[Frame(f.index, f.t, np.ascontiguousarray(flip(f.image))) for f in frames] for flip in flips]


@pytest.fixture(scope="module")
def dual_config(lean_config) -> PipelineConfig:
    return lean_config.model_copy(
        update={
            "road": lean_config.road.model_copy(update={"enabled": True, "every_n_frames": 2}),
            "detector": lean_config.detector.model_copy(update={"conf": 0.01, "tiling": "on", "every_n_frames": 1}),
        }
    )


def count_passes(pipeline: Pipeline) -> list[tuple[int, int | None]]:
    """(images, input size) of every detector model call, below the shared passes."""
    calls: list[tuple[int, int | None]] = []
    base: Any = type(pipeline.detector)  # the real VehicleDetector class, subclassed below to count its calls

    def _predict(self, images, imgsz=None):
        calls.append((len(images), imgsz))
        return base._predict(self, images, imgsz=imgsz)

    pipeline.detector.__class__ = type("CountingDetector", (base,), {"_predict": _predict})
    return calls


def test_parallel_streams_equal_each_stream_alone(dual_config, feeds):
    separate = []
    for feed in feeds:
        p = Pipeline(dual_config)
        separate.append([p.step(f) for f in feed])
    streams = [Pipeline(dual_config) for _ in feeds]
    calls = [count_passes(p) for p in streams]
    together = list(zip(*[step_streams(streams, list(step)) for step in zip(*feeds)]))
    assert sum(same_results(list(t), s) for t, s in zip(together, separate)) > 0, "no tracks: nothing compared"
    # every detector call of a step carried all three streams' native passes (one call per step, 3 images)
    native = [c for c in calls[0] + calls[1] + calls[2] if c[1] is not None]
    assert native and all(n == 3 for n, _ in native), native
    assert len(native) == N_FRAMES


def test_sequential_mode_gives_the_same_tracks(dual_config, feeds):
    a = [Pipeline(dual_config) for _ in feeds[:2]]
    b = [Pipeline(dual_config) for _ in feeds[:2]]
    ra = list(zip(*[step_streams(a, list(s), parallel=True) for s in zip(*feeds[:2])]))
    rb = list(zip(*[step_streams(b, list(s), parallel=False) for s in zip(*feeds[:2])]))
    assert sum(same_results(list(x), list(y)) for x, y in zip(ra, rb)) > 0


def test_a_failing_stream_raises_and_the_others_finish(dual_config, feeds):
    streams = [Pipeline(dual_config) for _ in feeds]
    bad = Frame(0, 0.0, np.zeros((0, 0, 3), np.uint8))  # an empty image: the pipeline cannot step it
    with pytest.raises(Exception):
        step_streams(streams, [feeds[0][0], bad, feeds[2][0]])
    # the shared pass did not hang, and the healthy streams stepped
    assert streams[0].frames == 1 and streams[2].frames == 1


def test_service_batcher_threads_equal_each_stream_alone(dual_config, feeds):
    """The service's stepper: worker threads at their own pace, a window instead of a barrier."""
    separate = []
    for feed in feeds:
        p = Pipeline(dual_config)
        separate.append([p.step(f) for f in feed])
    # a window long enough that a worker delayed by a busy CPU (the suite beside other jobs) still finds another's
    # frame waiting: at 0.05 s a loaded machine once shared no pass at all
    batcher = StreamBatcher(window_s=0.5)
    out: list[list] = [[] for _ in feeds]

    def worker(i: int) -> None:
        p = Pipeline(dual_config)
        for f in feeds[i]:
            out[i].append(batcher.step(p, f))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(feeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sum(same_results(o, s) for o, s in zip(out, separate)) > 0
    assert batcher.shared.images > batcher.shared.passes  # some passes were shared


def test_batched_video_prefetches_native_passes(lean_config, feeds):
    """Within one video (``BatchedPipeline``): the native-resolution passes of a batch's frames run as one call,
    not one by one as cache misses, and the tracks equal stepping frame by frame."""
    from edge.batch.batched import BatchedPipeline

    cfg = lean_config.model_copy(
        update={"detector": lean_config.detector.model_copy(update={"conf": 0.01, "tiling": "on", "every_n_frames": 1})}
    )
    alone = Pipeline(cfg)
    expected = [alone.step(f) for f in feeds[0]]
    pipe = Pipeline(cfg)
    calls = count_passes(pipe)
    got = list(BatchedPipeline(pipe).run(feeds[0], batch_size=3))
    assert same_results(got, expected) > 0
    assert [n for n, imgsz in calls] == [3, 3] and all(imgsz is not None for _, imgsz in calls)
