"""A live stream faster than its processing: the worker keeps every k-th frame, evenly, with k adapted to the load,
instead of whatever the full queue happens to drop (``edge/service/pacing.py``)."""

from __future__ import annotations

import math
import shutil
import time

import pytest
from service_fakes import make_pipeline
from service_helpers import free_port, wait_for

from edge.service.ingest import check_source
from edge.service.metrics import ServiceMetrics
from edge.service.workers import StreamSpec, StreamWorker, WorkerDeps
from tests.edge.service.test_live_stream import serve_clip

pytestmark = pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="ffmpeg not installed (Debian: apt-get install ffmpeg)"
)

STEP_S = 0.1  # the "model": 10 frames a second at most, against a 25 fps stream


def test_a_stream_faster_than_processing_is_shed_evenly(settings, clip):
    processed: list[tuple[int, float]] = []  # (frame, keep_every when it was processed)
    worker: StreamWorker | None = None

    def slow_pipeline():
        pipe = make_pipeline(settings.pipeline)
        step = pipe.step

        def slow_step(frame):
            time.sleep(STEP_S)
            assert worker is not None and worker.pacer is not None
            processed.append((frame.index, worker.pacer.keep_every))
            return step(frame)

        pipe.step = slow_step
        return pipe

    port = free_port()
    ffmpeg = serve_clip(clip, port)  # MPEG-TS over TCP at the clip's real rate (25 fps), looped
    try:
        spec = StreamSpec(1, "fast", "pull", check_source(f"tcp://127.0.0.1:{port}", None), None, None, None)
        worker = StreamWorker(spec, WorkerDeps(settings.service, slow_pipeline, None, ServiceMetrics()))
        worker.start()
        # the first second: no cost measured yet, the queue is the only guard; then the pacer takes over
        wait_for(lambda: worker.frames_received >= 100, 30, "4 s of the stream")
        settled_from, queue_dropped = len(processed), worker.queue.dropped
        wait_for(lambda: worker.frames_received >= 250, 30, "6 s more of the stream")
        worker.stop()
    finally:
        ffmpeg.kill()
        ffmpeg.wait()
    stats = worker.stats()
    assert stats["received"] == stats["processed"] + stats["dropped"]
    assert stats["shed"] >= stats["received"] // 2  # most frames were never given to the pipeline...
    assert worker.queue.dropped - queue_dropped <= 2  # ...and once paced, the queue itself dropped (almost) nothing
    settled = processed[settled_from:]
    ks = [k for _, k in settled]
    assert min(ks) >= 2, ks  # 25 fps at >= 0.1 s per frame: at least every 2nd frame shed
    # kept frames evenly spaced: floor(k) or ceil(k) apart for the k in force (never the queue's 1, 1, 1, 8)
    gaps = [(b - a, kb) for (a, _), (b, kb) in zip(settled, settled[1:])]
    even = [g for g, k in gaps if math.floor(k) <= g <= math.ceil(k)]
    assert len(even) >= 0.8 * len(gaps), gaps
