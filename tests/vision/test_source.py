from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.conftest import shared_path
from vision.source import ImageFolderSource, SourceError, VideoFileSource, open_source


def _write_clip(path: Path, n: int = 12, w: int = 160, h: int = 96, fps: float = 10.0) -> Path:
    vw = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, (w, h))
    for i in range(n):
        img = np.full((h, w, 3), 40, np.uint8)
        cv2.rectangle(img, (5 + 5 * i, 30), (25 + 5 * i, 45), (0, 0, 255), -1)
        vw.write(img)
    vw.release()
    return path


def test_video_frames_in_order_with_timestamps(tmp_path):
    src = VideoFileSource(_write_clip(tmp_path / "a.mp4"))
    frames = list(src)
    assert [f.index for f in frames] == list(range(12))
    assert frames[0].t == 0 and frames[5].t == pytest.approx(0.5, abs=1e-3)
    assert src.info.width == 160 and src.info.height == 96 and src.info.fps == pytest.approx(10)
    assert frames[3].image.shape == (96, 160, 3)


def test_max_frames(tmp_path):
    assert len(list(VideoFileSource(_write_clip(tmp_path / "a.mp4"), max_frames=4))) == 4


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p, "no such file"),
        (lambda p: (p.write_bytes(b""), p)[1], "empty"),
        (lambda p: (p.write_text("hello, I am not a video\n" * 50), p)[1], "not a readable video"),
    ],
)
def test_bad_files_are_clear_errors(tmp_path, make, message):
    with pytest.raises(SourceError, match=message) as exc:
        VideoFileSource(make(tmp_path / "clip.mp4"))
    assert "clip.mp4" in str(exc.value)


def test_truncated_video_is_an_error(tmp_path):
    full = _write_clip(tmp_path / "full.mp4", n=30)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    with pytest.raises(SourceError, match="cut.mp4"):
        list(open_source(cut))


def test_audio_only_file_has_no_video_stream(tmp_path):
    wav = tmp_path / "sound.wav"
    import wave

    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 800)
    with pytest.raises(SourceError, match="no video stream"):
        VideoFileSource(wav)


def test_image_folder_reads_seqinfo_rate(tmp_path):
    (tmp_path / "img1").mkdir()
    for i in range(3):
        cv2.imwrite(str(tmp_path / "img1" / f"{i + 1:06d}.jpg"), np.full((40, 60, 3), i * 50, np.uint8))
    (tmp_path / "seqinfo.ini").write_text("[Sequence]\nframeRate=20\n")
    src = open_source(tmp_path)
    assert isinstance(src, ImageFolderSource) and src.info.fps == 20
    assert [round(f.t, 3) for f in src] == [0, 0.05, 0.1]


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(SourceError, match="no images"):
        open_source(tmp_path)


def test_real_uavdt_sequence():
    seq = shared_path("data", "mot", "uavdt_M1303")
    src = open_source(seq, max_frames=3)
    assert src.info.fps == 30 and (src.info.width, src.info.height) == (1024, 540)
    assert len(list(src)) == 3


def test_real_nadir_video_metadata():
    src = open_source(shared_path("data", "real_video", "nadir_interchange", "drone.mp4"))
    assert (src.info.width, src.info.height, src.info.fps) == (1920, 1080, 25.0)
    assert src.info.frame_count == 177
