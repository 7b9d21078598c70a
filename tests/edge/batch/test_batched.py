"""Batched detection gives the same results as frame by frame: within a video, across streams, through the runner."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest

from edge.batch.batched import BatchedPipeline, step_streams
from edge.batch.decode import DecodeThread
from edge.runner import process_video
from tracking.config import PipelineConfig
from tracking.pipeline import Pipeline
from vision.detection import VehicleDetector
from vision.source import FrameSource, SourceError, open_source
from vision.types import Frame

N_FRAMES = 8


@pytest.fixture(scope="module")
def frames(detector_video):
    with open_source(detector_video, max_frames=N_FRAMES) as src:
        return list(src)


def sensitive(lean_config, **detector) -> PipelineConfig:
    """conf 0.01: plenty of (weak) boxes, so batching has many chances to differ."""
    return lean_config.model_copy(
        update={"detector": lean_config.detector.model_copy(update={"conf": 0.01, **detector})}
    )


def same_results(a, b) -> int:
    """Assert two result lists agree (ids, classes, boxes, speeds); return how many tracks they hold."""
    assert len(a) == len(b)
    n = 0
    for ra, rb in zip(a, b):
        assert [t.track_id for t in ra.tracks] == [t.track_id for t in rb.tracks], ra.frame.index
        for ta, tb in zip(ra.tracks, rb.tracks):
            assert ta.class_id == tb.class_id and ta.moving == tb.moving
            np.testing.assert_allclose(ta.xyxy, tb.xyxy, atol=1e-2)
            assert (ta.speed_kmh is None) == (tb.speed_kmh is None)
            if ta.speed_kmh is not None:
                assert ta.speed_kmh == pytest.approx(tb.speed_kmh, abs=1e-3)
        n += len(ra.tracks)
    return n


@pytest.mark.parametrize(
    "detector,road",
    [({"tiling": "off"}, False), ({"tiling": "on", "imgsz": 320}, False), ({"tiling": "on", "imgsz": 320}, True)],
    ids=["whole", "tiled", "tiled+road"],
)
def test_batch_step_equals_frame_by_frame(lean_config, frames, detector, road, tmp_path):
    cfg = sensitive(lean_config, **detector)
    if road:  # a fixed road mask over the left half: off-road tiles are skipped, as the road layer makes them
        h, w = frames[0].image.shape[:2]
        mask = np.zeros((h, w), np.uint8)
        mask[:, : w // 2] = 255
        cv2.imwrite(str(tmp_path / "road.png"), mask)
        cfg = cfg.model_copy(
            update={"road": cfg.road.model_copy(update={"enabled": True, "mask_file": str(tmp_path / "road.png")})}
        )
    pipe = Pipeline(cfg)
    h, w = frames[0].image.shape[:2]
    pipe.reset(w, h, 10.0)
    one_by_one = [pipe.step(f) for f in frames]
    detections_seen = pipe.detector.tiles_run if detector["tiling"] == "on" else None
    pipe.reset(w, h, 10.0)
    batched = list(BatchedPipeline(pipe).run(frames, batch_size=5))
    assert same_results(one_by_one, batched) > 0, "no tracks at all: the comparison would prove nothing"
    if detections_seen is not None:
        assert pipe.detector.tiles_run == 2 * detections_seen  # the same tiles were asked for


def spy_on_model(pipeline: Pipeline) -> list[int]:
    """Count the detector's model calls (images per call) below any cache: a subclass with a counting _predict."""
    calls: list[int] = []
    assert isinstance(pipeline.detector, VehicleDetector)
    base = type(pipeline.detector)

    def _predict(self, images):
        calls.append(len(images))
        return base._predict(self, images)

    pipeline.detector.__class__ = type("CountingDetector", (base,), {"_predict": _predict})
    return calls


def test_one_model_call_per_batch(lean_config, frames):
    pipe = Pipeline(sensitive(lean_config, every_n_frames=1))
    calls = spy_on_model(pipe)
    list(BatchedPipeline(pipe).run(frames, batch_size=4))
    assert calls == [4] * (N_FRAMES // 4)


def test_a_batch_holds_only_the_frames_the_detector_runs_on(lean_config, frames):
    """detector.every_n_frames=3: frames the detector skips are not run through the model (the prefetch plans by
    the pipeline's current stride, a guess: what it did not foresee runs on its own), and the results equal stepping
    frame by frame."""
    cfg = sensitive(lean_config, every_n_frames=3)
    pipe = Pipeline(cfg)
    calls = spy_on_model(pipe)
    batched = list(BatchedPipeline(pipe).run(frames, batch_size=6))
    # frames skipped; the model saw fewer images than frames (a wrong guess costs at most a wasted image)
    assert pipe.detector_frames < N_FRAMES and pipe.detector_frames <= sum(calls) < N_FRAMES
    alone = Pipeline(cfg)
    assert same_results(batched, [alone.step(f) for f in frames]) > 0


def mirrored(frame: Frame) -> Frame:
    return Frame(frame.index, frame.t, np.ascontiguousarray(frame.image[:, ::-1]))


def test_streams_share_one_model_call(lean_config, frames):
    """Two live streams (the clip and its mirror image) stepped together equal each stepped on its own."""
    cfg = sensitive(lean_config, every_n_frames=1)
    streams, alone = [Pipeline(cfg), Pipeline(cfg)], [Pipeline(cfg), Pipeline(cfg)]
    feeds = [frames[:6], [mirrored(f) for f in frames[:6]]]
    together = list(zip(*[step_streams(streams, [a, b]) for a, b in zip(*feeds)]))
    separate = [[alone[i].step(f) for f in feeds[i]] for i in range(2)]
    assert same_results(together[0], separate[0]) + same_results(together[1], separate[1]) > 0
    calls = [spy_on_model(p) for p in streams]
    step_streams(streams, [frames[6], mirrored(frames[6])])
    assert calls[0] + calls[1] == [2]  # both streams' frames in one forward pass
    with pytest.raises(ValueError, match="pipelines but"):
        step_streams(streams, [])


def test_runner_with_batches_writes_the_same_tracks(lean_config, detector_video, tmp_path):
    cfg = sensitive(lean_config)
    pipe = Pipeline(cfg)
    run: dict[str, Any] = dict(pipeline=pipe, write_video=False, progress=False, max_frames=N_FRAMES)
    a = process_video(detector_video, tmp_path / "b1", cfg, **run)
    b = process_video(detector_video, tmp_path / "b4", cfg, batch_size=4, **run)
    assert a.summary["counts"] == b.summary["counts"]
    rows_a = np.loadtxt(a.out_dir / "tracks_mot.txt", delimiter=",", ndmin=2)
    rows_b = np.loadtxt(b.out_dir / "tracks_mot.txt", delimiter=",", ndmin=2)
    assert len(rows_a) > 0
    np.testing.assert_allclose(rows_a, rows_b, atol=1e-2)


def test_decode_thread_keeps_order_and_raises_source_errors(detector_video):
    with open_source(detector_video, max_frames=8) as src:
        direct = [f.image for f in src]
    with open_source(detector_video, max_frames=8) as src, DecodeThread(src, maxsize=2) as frames:
        threaded = [f.image for f in frames]
    assert len(threaded) == 8 and all(np.array_equal(a, b) for a, b in zip(direct, threaded))

    class Damaged(FrameSource):  # a file that breaks after 3 frames: the error must reach the consumer as it is
        def __iter__(self):
            yield from direct_frames[:3]
            raise SourceError("flight.mp4: video is damaged or truncated at frame 3")

    direct_frames = [Frame(i, i / 25, im) for i, im in enumerate(direct)]
    seen = []
    with pytest.raises(SourceError, match="flight.mp4: video is damaged"):
        with DecodeThread(Damaged()) as frames:
            for f in frames:
                seen.append(f.index)
    assert seen == [0, 1, 2]

    with open_source(detector_video) as src:
        reader = DecodeThread(src, maxsize=1)
        with reader as frames:
            next(iter(frames))  # leave early: the producer must stop before the container closes
        assert not reader._thread.is_alive()
