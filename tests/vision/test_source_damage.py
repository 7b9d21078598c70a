"""A damaged video yields every frame it can and reports what it could not decode (never a silent short run)."""

from __future__ import annotations

import pytest

from tests.conftest import make_test_clip, shared_path
from vision.source import VideoFileSource


def _decode(path):
    src = VideoFileSource(path)
    n = sum(1 for _ in src)
    return src, n


def test_intact_clip_has_no_losses(tmp_path):
    src, n = _decode(make_test_clip(tmp_path / "ok.mp4"))
    assert n == 100 and src.info.frame_count == 100 and src.losses == []


def test_truncated_clip_reports_the_lost_tail(tmp_path):
    data = make_test_clip(tmp_path / "ok.mp4").read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) * 6 // 10])  # moov first (faststart): the index still declares 100 frames
    src, n = _decode(cut)
    assert 10 < n < 100
    assert len(src.losses) == 1
    loss = src.losses[0]
    assert "ended early" in loss.reason and f"{n} of 100" in loss.reason
    assert loss.first_frame == n + 1 and loss.last_frame == 100  # 1-based, the decoded frames are the first n
    assert loss.start_s == pytest.approx(n / 25, abs=0.05) and loss.end_s == pytest.approx(99 / 25, abs=0.05)


def test_real_nadir_clip_cut_at_2_5_mb():
    """The issue's case: 177 frames declared, 122 decodable; before, the run looked complete."""
    clip = shared_path("data", "real_video", "nadir_interchange", "drone.mp4")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        cut = Path(tmp) / "drone_cut.mp4"
        cut.write_bytes(clip.read_bytes()[:2_500_000])
        src, n = _decode(cut)
    assert src.info.frame_count == 177 and n == 122
    [loss] = src.losses
    assert (loss.first_frame, loss.last_frame, loss.frames) == (123, 177, 55)


def test_damage_in_the_middle_is_skipped_and_reported():
    """200 kB zeroed mid-file: decoding goes on after the damage; the stretch it lost is reported."""
    clip = shared_path("data", "real_video", "nadir_interchange", "drone.mp4")
    import tempfile
    from pathlib import Path

    data = bytearray(clip.read_bytes())
    data[1_500_000:1_700_000] = bytes(200_000)
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "drone_hole.mp4"
        bad.write_bytes(bytes(data))
        src, n = _decode(bad)
    assert 122 < n < 177  # more than the part before the hole: decoding resumed after it
    assert len(src.losses) >= 1
    lost = sum(loss.frames for loss in src.losses)
    assert n + lost == pytest.approx(177, abs=2)  # decoded + reported lost = the whole clip
    assert all(1 < loss.first_frame <= loss.last_frame <= 177 for loss in src.losses)
