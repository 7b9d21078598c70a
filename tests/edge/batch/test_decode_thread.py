"""The decode thread: every frame of the file in order, a damaged file decoded as far as it goes with its losses
reported, the hardware decoder used only where it works (software otherwise, with the reason logged)."""

from __future__ import annotations

import logging

import numpy as np

from edge.batch.decode import DecodeThread, use_hardware_decode
from tests.conftest import make_test_clip
from vision.source import VideoFileSource


def test_every_frame_in_order(tmp_path):
    clip = make_test_clip(tmp_path / "ok.mp4", frames=60)
    direct = [f.image for f in VideoFileSource(clip)]
    src = VideoFileSource(clip)
    with DecodeThread(src, maxsize=2) as frames:
        got = list(frames)
    assert [f.index for f in got] == list(range(60))
    assert all(np.array_equal(a.image, b) for a, b in zip(got, direct))
    assert src.losses == []


def test_damaged_file_completes_what_it_can_and_says_what_was_lost(tmp_path):
    data = bytearray(make_test_clip(tmp_path / "ok.mp4", frames=100).read_bytes())
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(bytes(data[: len(data) * 6 // 10]))  # the index still declares 100 frames
    src = VideoFileSource(cut)
    with DecodeThread(src, maxsize=3) as frames:
        got = [f.index for f in frames]
    assert 10 < len(got) < 100 and got == list(range(len(got)))
    [loss] = src.losses
    assert "ended early" in loss.reason and (loss.first_frame, loss.last_frame) == (len(got) + 1, 100)


def test_hardware_decode_only_where_it_works(tmp_path, caplog):
    clip = make_test_clip(tmp_path / "ok.mp4", frames=5)
    src = VideoFileSource(clip)
    assert use_hardware_decode(src, "cpu") is False  # a CPU pipeline decodes in software, nothing to say
    with caplog.at_level(logging.INFO, logger="airpatrol.decode"):
        on_gpu = use_hardware_decode(src, "cuda")
    # either the GPU decoder took over, or the log says why not; the frames are the same either way
    assert caplog.messages and ("NVDEC" in caplog.messages[-1]) == on_gpu
    if not on_gpu:
        assert "decoding in software" in caplog.messages[-1]
    with DecodeThread(src) as frames:
        images = [f.image for f in frames]
    direct = [f.image for f in VideoFileSource(clip)]
    assert len(images) == 5
    if not on_gpu:
        assert all(np.array_equal(a, b) for a, b in zip(images, direct))
