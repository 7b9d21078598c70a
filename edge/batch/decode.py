"""Decoding off the critical path: a thread reads frames into a bounded queue while the pipeline works.

On a CUDA pipeline the file is decoded by the GPU's video decoder (NVDEC through FFmpeg/PyAV) when this machine's
FFmpeg and GPU can; otherwise in software, and a log line says why.

FFmpeg (PyAV) releases the GIL while it decodes and converts to BGR, so on a machine with a spare core the next
frames are ready when the pipeline asks for them. The queue is bounded: memory stays at ``maxsize`` frames however
fast the decoder is. Errors of the source (a damaged file) are raised in the consumer, as the same exception.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from tracking.frame_rate import analysed
from tracking.pipeline import Pipeline
from tracking.track_starts import from_first_frame
from tracking.types import FrameResult
from vision.source import FrameSource, VideoFileSource
from vision.types import Frame

log = logging.getLogger("airpatrol.decode")

_DONE = object()


def use_hardware_decode(source: FrameSource, device: str) -> bool:
    """Switch ``source`` to the GPU's decoder when ``device`` is CUDA and it works here; True if it did."""
    if not device.startswith("cuda") or not isinstance(source, VideoFileSource):
        return False
    why_not = source.use_hardware_decoder("cuda")
    if why_not is None:
        log.info("%s: decoding on the GPU (NVDEC)", source.path)
        return True
    log.info("%s: hardware decoding unavailable (%s); decoding in software", source.path, why_not)
    return False


class DecodeThread:
    """``with DecodeThread(source) as frames: for frame in frames: ...`` - the thread is joined on exit."""

    def __init__(self, source: FrameSource, maxsize: int = 8):
        self.source = source
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, maxsize))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="airpatrol-decode", daemon=True)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for frame in self.source:
                if not self._put(frame):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)
            return
        self._put(_DONE)

    def __iter__(self) -> Iterator[Frame]:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def __enter__(self) -> "DecodeThread":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        # Stop the producer before the caller closes the container it reads from.
        self._stop.set()
        while self._thread.is_alive():
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.1)


@contextmanager
def frame_results(
    pipeline: Pipeline,
    source: FrameSource,
    batch_size: int = 1,
    queue_frames: int | None = None,
    step: int = 1,
    between: list[Frame] | None = None,
) -> Iterator[Iterator[FrameResult]]:
    """Pipeline results for every frame of ``source``: decoded in a thread, detected ``batch_size`` frames at a time.
    ``step`` > 1: for every ``step``-th frame only; the others go into ``between`` (``tracking.frame_rate``)."""
    if batch_size < 1:
        raise ValueError(f"--batch-size {batch_size}: must be at least 1")
    use_hardware_decode(source, pipeline.device)
    with DecodeThread(source, queue_frames or max(4, 2 * batch_size)) as decoded:
        frames: Iterable[Frame] = decoded
        if step > 1:
            frames = analysed(decoded, step, between if between is not None else [])
        if batch_size == 1:
            results: Iterator[FrameResult] = (pipeline.step(f) for f in frames)
        else:
            from edge.batch.batched import BatchedPipeline

            results = iter(BatchedPipeline(pipeline).run(frames, batch_size))
        # a recorded run: each confirmed track is reported from its first frame
        yield from_first_frame(results, pipeline.report_lookback_frames())
