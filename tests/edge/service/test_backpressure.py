"""When processing falls behind, frames are dropped and counted: memory and latency stay bounded (thinned evenly over
up to a second of stream, the OLDEST beyond)."""

from __future__ import annotations

import threading
import time

import numpy as np
from service_fakes import make_pipeline, render
from service_helpers import wait_for

from edge.service.ingest import DropOldestQueue, FrameQueue, IncomingFrame
from edge.service.metrics import ServiceMetrics
from edge.service.workers import StreamSpec, StreamWorker, WorkerDeps


def test_queue_drops_oldest_first():
    q: DropOldestQueue[int] = DropOldestQueue(4)
    dropped = [q.put(i) for i in range(10)]
    assert dropped == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1] and q.dropped == 6 and len(q) == 4
    assert [q.get(0.01) for _ in range(4)] == [6, 7, 8, 9]  # the newest survive, in order
    t0 = time.monotonic()
    assert q.get(0.05) is None and time.monotonic() - t0 >= 0.04  # empty: waits, then gives up
    threading.Timer(0.05, q.close).start()
    assert q.get(5.0) is None  # closing wakes a waiting consumer


def _frames(n: int, fps: float, arrival_s: float) -> list[IncomingFrame]:
    """``n`` frames of a ``fps`` stream arriving ``arrival_s`` apart."""
    return [IncomingFrame(np.zeros((2, 2, 3), np.uint8), i / fps, 100.0 + i * arrival_s) for i in range(n)]


def test_a_burst_is_thinned_evenly_over_its_time():
    # a pull reader's one-second probe: the stream's first second handed over in 60 ms
    q = FrameQueue(4, span_s=1.0)
    for f in _frames(30, 30.0, 0.002):
        q.put(f)
    kept = [round(q.get(0.01).t * 30) for _ in range(4)]
    assert kept[0] == 0 and kept[-1] == 29  # the oldest (next to be processed) and the newest stay
    gaps = np.diff(kept)
    assert gaps.max() <= 2 * gaps.min() + 1, kept  # spread over the second, not its last four frames
    assert q.dropped == q.thinned == 26


def test_beyond_its_span_the_queue_drops_the_oldest():
    # a worker stuck for 3 s on a 30 fps stream: what waits is spread over the last second, never older
    q = FrameQueue(4, span_s=1.0)
    for f in _frames(90, 30.0, 1 / 30):
        q.put(f)
    kept = [q.get(0.01).t for _ in range(4)]
    assert kept[-1] == 89 / 30 and kept[-1] - kept[0] <= 1.0 + 1e-9 and kept[-1] - kept[0] >= 0.5, kept
    assert q.dropped == 86 and 0 < q.thinned < 86


def test_a_span_of_zero_keeps_the_newest_frames():
    q = FrameQueue(4, span_s=0.0)
    for f in _frames(30, 30.0, 0.002):
        q.put(f)
    assert [round(q.get(0.01).t * 30) for _ in range(4)] == [26, 27, 28, 29] and q.dropped == 26 and q.thinned == 0


def test_slow_pipeline_drops_oldest_frames_and_processes_the_newest(settings):
    cfg = settings.service.model_copy(update={"queue_frames": 3})
    gate = threading.Event()

    def slow_pipeline():
        pipe = make_pipeline(settings.pipeline)
        step = pipe.step

        def gated_step(frame):
            gate.wait(10)  # the "model" is stuck until the producer is done
            return step(frame)

        pipe.step = gated_step
        return pipe

    metrics = ServiceMetrics()
    worker = StreamWorker(
        StreamSpec(1, "slow", "push", None, None, None, None), WorkerDeps(cfg, slow_pipeline, None, metrics)
    )
    worker.start()
    assert worker.attach_pusher(object())
    image = render(0)
    for i in range(40):
        worker.submit(IncomingFrame(image.copy(), i / 25, time.perf_counter()))
        assert len(worker.queue) <= 3  # bounded at every moment
    gate.set()
    worker.stop()
    stats = worker.stats()
    assert stats["received"] == 40 and stats["processed"] + stats["dropped"] == 40
    assert stats["dropped"] >= 40 - 3 - 1  # at most the queue plus the frame in hand got through
    assert worker.latest.frame.index == 39  # the newest frame is never the one dropped
    text = metrics.render().decode()
    assert f'airpatrol_stream_frames_dropped_total{{stream="1"}} {float(stats["dropped"])}' in text
    assert worker.state == "finished"


def test_a_frame_that_breaks_the_pipeline_is_skipped_not_fatal(settings):
    def flaky_pipeline():
        pipe = make_pipeline(settings.pipeline)
        step = pipe.step

        def maybe_fail(frame):
            if frame.index == 2:
                raise RuntimeError("corrupt frame")
            return step(frame)

        pipe.step = maybe_fail
        return pipe

    worker = StreamWorker(
        StreamSpec(2, "flaky", "push", None, None, None, None),
        WorkerDeps(settings.service, flaky_pipeline, None, ServiceMetrics()),
    )
    worker.start()
    worker.attach_pusher(object())
    for i in range(5):
        worker.submit(IncomingFrame(render(i), i / 25, time.perf_counter()))
        wait_for(lambda: not len(worker.queue), 10, "the frame to be taken")
    worker.stop()
    assert worker.frame_errors == 1 and worker.frames_processed == 4 and "corrupt frame" in worker.last_error
    assert worker.state == "finished"
