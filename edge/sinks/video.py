"""Annotated MP4 (H.264 so browsers play it; MPEG-4 Part 2 when the FFmpeg build lacks libx264)."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from edge.sinks.annotate import FrameAnnotator
from tracking.types import FrameResult, RunInfo


class AnnotatedVideoSink:
    def __init__(self, folder: Path, name: str = "annotated.mp4", max_width: int = 1920,
                 speed_limit_kmh: float | None = None):
        self.path = Path(folder) / name
        self.max_width = max_width
        self.speed_limit_kmh = speed_limit_kmh  # vehicles above it are marked as violators

    def open(self, info: RunInfo) -> None:
        self._annotate = FrameAnnotator(self.speed_limit_kmh, fps=info.fps or 25.0)
        scale = min(1.0, self.max_width / info.width)
        # yuv420p needs even dimensions
        self.size = (int(info.width * scale) // 2 * 2, int(info.height * scale) // 2 * 2)
        self._c = av.open(str(self.path), "w")
        rate = Fraction(info.fps).limit_denominator(1001)
        try:
            self._s = self._c.add_stream("libx264", rate=rate)
            self._s.options = {"crf": "26", "preset": "veryfast"}
        except (av.error.FFmpegError, ValueError):
            self._s = self._c.add_stream("mpeg4", rate=rate)
            self._s.bit_rate = 4_000_000
        self._s.width, self._s.height = self.size
        self._s.pix_fmt = "yuv420p"

    def write(self, result: FrameResult) -> None:
        import cv2

        img = self._annotate(result)
        if (img.shape[1], img.shape[0]) != self.size:
            img = cv2.resize(img, self.size, interpolation=cv2.INTER_AREA)
        frame = av.VideoFrame.from_ndarray(img, format="bgr24")
        for packet in self._s.encode(frame):
            self._c.mux(packet)

    def close(self, summary: dict[str, Any]) -> None:
        for packet in self._s.encode():
            self._c.mux(packet)
        self._c.close()

    def abort(self, error: BaseException | None) -> None:
        try:
            self._c.close()
        except Exception:  # the file is discarded anyway
            pass
