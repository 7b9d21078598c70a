"""What a recorded run reports once it knows the next second: tracks from their first frame, lost frames filled.

The pipeline withholds a track only motion blobs have fed until it has lasted ``motion.min_motion_track_s`` (flicker
rarely lasts, real movers do). Live, that is all it can do; a recorded run can do better: it holds each frame's result
back that long, and when a withheld track is confirmed, the frames it was withheld on report it too. The vehicle's
trajectory, speed and line crossings then start where it was first seen, not a second later; a track never confirmed
is dropped as before. Measured: docs/detector_scale.md (the 1080p interchange).

The same hold-back fills gaps (``tracker.fill_lost_gaps``): a moving track the tracker lost (no detection matched it)
and found again within the held frames is reported on the frames between, at boxes interpolated between the two it
was seen at, as ByteTrack's authors interpolate offline, but in the first frame's pixels (``FrameResult.to_first``),
so the drone's own motion does not bend the path (no speed there: speed flag ``interpolated``). Only frames the
tracker had it lost on (``FrameResult.lost_ids``) are filled: a gap a rule made (the frame's edge, a standing
vehicle's blob) stays a gap, and so does a standing track's (on synthetic clips those were mostly static clutter).
Measured: docs/detector_scale.md.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Iterator

import numpy as np

from tracking.types import INTERPOLATED, FrameResult, TrackState


def _lerp(a: float | None, b: float | None, w: float) -> float | None:
    return None if a is None or b is None else (1 - w) * a + w * b


def _through(H: np.ndarray, xy: np.ndarray) -> np.ndarray:
    p = H @ np.array([xy[0], xy[1], 1.0])
    return p[:2] / p[2]


def in_first_frame(result: FrameResult, tr: TrackState) -> np.ndarray:
    """``tr``'s box centre in the run's first frame's pixels (the drone's own motion taken out; as it is where the
    pipeline did not measure that motion)."""
    c = np.array(tr.center, np.float64)
    return _through(result.to_first, c) if result.to_first is not None else c


def interpolated(before: TrackState, after: TrackState, w: float, centre: np.ndarray | None = None) -> TrackState:
    """The track a share ``w`` (0..1) of the way from ``before`` to ``after`` (the same track on two frames): box,
    ground position and lat/lon interpolated; no speed (nothing was measured there), flagged ``interpolated``, so it
    counts for no speed statistic and no violation. ``centre``: where the box's centre is (pixels), when known
    better than halfway between the two boxes (the drone moved in between)."""
    xyxy = (1 - w) * np.asarray(before.xyxy, np.float64) + w * np.asarray(after.xyxy, np.float64)
    if centre is not None:
        xyxy += np.tile(np.asarray(centre, np.float64) - (xyxy[:2] + xyxy[2:]) / 2, 2)
    ground = None
    if before.ground_xy is not None and after.ground_xy is not None:
        ground = (
            (1 - w) * before.ground_xy[0] + w * after.ground_xy[0],
            (1 - w) * before.ground_xy[1] + w * after.ground_xy[1],
        )
    return dataclasses.replace(
        before,
        xyxy=xyxy.astype(np.asarray(before.xyxy).dtype),
        score=min(before.score, after.score),
        speed_kmh=None,
        speed_sigma_kmh=None,
        speed_flag=INTERPOLATED,
        ground_xy=ground,
        lat=_lerp(before.lat, after.lat, w),
        lon=_lerp(before.lon, after.lon, w),
    )


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
        if self._held and self._held[-1].lost_ids:
            self._fill_gaps(result)
        self._held.append(result)
        out = []
        while len(self._held) > self.frames:
            out.append(self._held.popleft())
        return out

    def _fill_gaps(self, result: FrameResult) -> None:
        """Report each track of ``result`` lost on the frames just before on those frames too, when every one of
        them had it lost and a held frame before them reports it (the other end of the gap)."""
        last = self._held[-1]
        for after in result.tracks:
            tid = after.track_id
            if tid not in last.lost_ids or not after.moving:
                continue
            gap: list[FrameResult] = []
            before: TrackState | None = None
            for earlier in reversed(self._held):
                before = next((tr for tr in earlier.tracks if tr.track_id == tid), None)
                if before is not None or tid not in earlier.lost_ids:
                    break  # the other end, or a frame a rule hid it on: nothing to fill then
                gap.append(earlier)
            if before is None or not before.moving:
                continue  # a standing "vehicle" lost and found again is as likely clutter: only movers are filled
            start = earlier
            # the two ends' centres in the first frame's pixels, where the drone's own motion is taken out
            ends = None
            if start.to_first is not None and result.to_first is not None:
                ends = (
                    _through(start.to_first, np.array(before.center)),
                    _through(result.to_first, np.array(after.center)),
                )
            n = len(gap) + 1
            for k, frame in enumerate(reversed(gap), start=1):
                w = k / n
                centre = None
                if ends is not None and frame.to_first is not None:
                    centre = _through(np.linalg.inv(frame.to_first), (1 - w) * ends[0] + w * ends[1])
                frame.tracks.append(interpolated(before, after, w, centre))

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
