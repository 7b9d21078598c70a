"""Annotated MP4 (H.264 so browsers play it; MPEG-4 Part 2 when the FFmpeg build lacks libx264).

Drawing and encoding run in a thread of their own behind a bounded queue: the pipeline hands a result over and goes
on with the next frame (libx264 and OpenCV release the GIL, so on a machine with a spare core the encoder costs the
frame loop almost nothing). An encoder error is raised in the caller at its next ``write`` or at ``close``.
"""

from __future__ import annotations

import queue
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

from edge.sinks.annotate import FrameAnnotator
from tracking.types import FrameResult, RunInfo

_END = object()


class AnnotatedVideoSink:
    def __init__(
        self,
        folder: Path,
        name: str = "annotated.mp4",
        max_width: int = 1920,
        speed_limit_kmh: float | None = None,
        queue_frames: int = 8,
    ):
        self.path = Path(folder) / name
        self.max_width = max_width
        self.speed_limit_kmh = speed_limit_kmh  # vehicles above it are marked as violators
        self.queue_frames = queue_frames  # results waiting for the encoder: bounds memory when it falls behind
        self._thread: threading.Thread | None = None

    def open(self, info: RunInfo) -> None:
        import av  # here, not at the top: a run without the annotated video (--no-video) needs no PyAV

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
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, self.queue_frames))
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._encode_loop, name="airpatrol-encode", daemon=True)
        self._thread.start()

    # -- the caller's side ---------------------------------------------------------------------------------------
    def write(self, result: FrameResult) -> None:
        self._raise_encoder_error()
        while True:
            try:
                self._queue.put(result, timeout=0.5)
                return
            except queue.Full:
                self._raise_encoder_error()  # an encoder that died leaves the queue full

    def close(self, summary: dict[str, Any]) -> None:
        self._finish_thread(drain=True)
        self._raise_encoder_error()
        for packet in self._s.encode():
            self._c.mux(packet)
        self._c.close()

    def abort(self, error: BaseException | None) -> None:
        self._finish_thread(drain=False)
        try:
            self._c.close()
        except Exception:  # the file is discarded anyway
            pass

    def _raise_encoder_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _finish_thread(self, drain: bool) -> None:
        if self._thread is None:
            return
        if not drain:
            self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.put(_END, timeout=0.1)
                break
            except queue.Full:
                if not drain or self._error is not None:  # nobody will take it: empty the queue for the thread
                    self._stop.set()
                    _empty(self._queue)
        self._thread.join()
        self._thread = None

    # -- the encoder thread ------------------------------------------------------------------------------------
    def _encode_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _END or self._stop.is_set():
                return
            try:
                self._encode(item)
            except BaseException as exc:  # raised in the caller; the rest of the queue is dropped
                self._error = exc
                self._stop.set()
                _empty(self._queue)
                return

    def _encode(self, result: FrameResult) -> None:
        import av
        import cv2

        img = self._annotate(result)
        if (img.shape[1], img.shape[0]) != self.size:
            img = cv2.resize(img, self.size, interpolation=cv2.INTER_AREA)
        frame = av.VideoFrame.from_ndarray(img, format="bgr24")
        for packet in self._s.encode(frame):
            self._c.mux(packet)


def _empty(q: queue.Queue) -> None:
    try:
        while True:
            q.get_nowait()
    except queue.Empty:
        pass
