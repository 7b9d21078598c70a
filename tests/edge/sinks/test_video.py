"""The annotated video is encoded in its own thread: every frame, in order; an encoder error reaches the caller."""

from __future__ import annotations

import time

import av
import numpy as np
import pytest

from edge.sinks.video import AnnotatedVideoSink
from tracking.types import FrameResult, RunInfo
from vision.types import Frame

W, H, N = 320, 192, 30


def _info() -> RunInfo:
    return RunInfo("test.mp4", W, H, 25.0, N, {}, "weights.pt", "dual_layer", "cpu")


def _result(i: int) -> FrameResult:
    # brightness grows with the frame index (steps of 7 survive H.264 at crf 26 on flat frames)
    return FrameResult(frame=Frame(i, i / 25, np.full((H, W, 3), 20 + 7 * i, np.uint8)), tracks=[])


def test_every_frame_encoded_in_order(tmp_path):
    sink = AnnotatedVideoSink(tmp_path, queue_frames=2)
    sink.open(_info())
    for i in range(N):
        sink.write(_result(i))
    sink.close({})
    assert sink._thread is None  # joined
    with av.open(str(sink.path)) as c:
        # the middle band of the frame (the annotator's status line is at the top)
        levels = [float(f.to_ndarray(format="gray")[H // 2 :, :].mean()) for f in c.decode(video=0)]
    assert len(levels) == N
    assert all(b > a for a, b in zip(levels, levels[1:])), levels


def test_encoder_error_is_raised_in_the_caller(tmp_path):
    sink = AnnotatedVideoSink(tmp_path)
    sink.open(_info())
    sink.write(_result(0))
    broken = FrameResult(frame=Frame(1, 0.04, np.zeros((H, W), np.float64)), tracks=[])  # not a BGR image
    sink.write(broken)
    with pytest.raises(Exception):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the error surfaces at a later write (or at close)
            sink.write(_result(2))
            time.sleep(0.01)
        sink.close({})
    sink.abort(None)
    assert sink._thread is None


def test_abort_stops_the_thread_without_waiting_for_the_queue(tmp_path):
    sink = AnnotatedVideoSink(tmp_path, queue_frames=4)
    sink.open(_info())
    for i in range(4):
        sink.write(_result(i))
    sink.abort(RuntimeError("disk full"))
    assert sink._thread is None
