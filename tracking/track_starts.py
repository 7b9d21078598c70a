"""A track reported from its first frame: the results of a recorded run held back until each track is decided.

The pipeline withholds a track only motion blobs have fed until it has lasted ``motion.min_motion_track_s`` (flicker
rarely lasts, real movers do). Live, that is all it can do; a recorded run can do better: it holds each frame's result
back that long, and when a withheld track is confirmed, the frames it was withheld on report it too. The vehicle's
trajectory, speed and line crossings then start where it was first seen, not a second later; a track never confirmed
is dropped as before. Measured: docs/detector_scale.md (the 1080p interchange).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from tracking.types import FrameResult


class TrackStarts:
    """``push`` each result in frame order, emit what it returns, then what ``flush`` returns; ``frames``: the
    look-back (``Pipeline.report_lookback_frames``); 0 passes every result through at once."""

    def __init__(self, frames: int):
        self.frames = max(0, int(frames))
        self._held: deque[FrameResult] = deque()

    def push(self, result: FrameResult) -> list[FrameResult]:
        if self.frames == 0:
            return [result]
        reported = {tr.track_id for tr in result.tracks}
        for earlier in self._held:
            if not earlier.withheld:
                continue
            now = [tr for tr in earlier.withheld if tr.track_id in reported]
            if now:
                earlier.tracks.extend(now)
                earlier.withheld = [tr for tr in earlier.withheld if tr.track_id not in reported]
        self._held.append(result)
        out = []
        while len(self._held) > self.frames:
            out.append(self._held.popleft())
        return out

    def flush(self) -> list[FrameResult]:
        out = list(self._held)
        self._held.clear()
        return out


def from_first_frame(results: Iterable[FrameResult], frames: int) -> Iterator[FrameResult]:
    """``results`` with each confirmed track reported from its first frame (held back ``frames`` frames)."""
    starts = TrackStarts(frames)
    for result in results:
        yield from starts.push(result)
    yield from starts.flush()
