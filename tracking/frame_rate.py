"""A recorded flight filmed at a high frame rate: the pipeline analyses every n-th frame; the frames between get their
tracks interpolated after the whole flight is linked.

Each analysed frame costs the pipeline about the same (ego-motion, road and motion layers, tracker; the detector's
stride counts frames), so a flight filmed at 30 fps took twice as long as the same flight at 15 fps, for the same
vehicles: a five-minute 1080p flight at 30 fps ran ~4.5x its duration on 2 cores against the issue's 3x (issue 32),
and the real 1080p interchange at 25 fps 3.5x. Every figure of the end-to-end study benchmark was measured on 15 fps
renders, so a recorded run analyses at most ``max_fps`` frames a second (every ``round(fps / max_fps)``-th frame:
a constant step, which the tracker's motion model assumes). Frames whose long side is at most
``full_rate_up_to_px`` (720p and smaller) cost a third of a 1080p frame or less and keep every frame: the real UAVDT
sequences (1024x540, 30 fps) run as before.

A frame between two analysed ones gets each track that both report, interpolated between them as a filled gap is
(``tracking.track_starts.interpolated``: box, ground position and lat/lon; no speed, flag ``interpolated``; in the
first frame's pixels where the drone's motion is known); a track on only one of the two ends there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

import numpy as np
from pydantic import Field

from tracking.track_starts import _through, in_first_frame, interpolated
from tracking.types import FrameResult
from vision.config_base import StageConfig
from vision.types import Frame


class AnalysisRateConfig(StageConfig):
    max_fps: float | None = Field(
        15.0,
        gt=0,
        description="recorded runs (process, batch) with whole-flight linking: analyse at most this many frames a "
        "second (every round(fps / max_fps)-th frame); the frames between get their tracks interpolated. None: every "
        "frame. Live streams analyse every frame they keep up with",
    )
    full_rate_up_to_px: int = Field(
        1280,
        ge=0,
        description="frames whose long side is at most this (720p and smaller) are all analysed whatever max_fps says",
    )


def analysis_step(fps: float, width: int, height: int, cfg: AnalysisRateConfig) -> int:
    """Analyse every n-th frame of a recording of this rate and size (1: every frame)."""
    if cfg.max_fps is None or max(width, height) <= cfg.full_rate_up_to_px or fps <= cfg.max_fps:
        return 1
    return max(1, round(fps / cfg.max_fps))


def analysed(frames: Iterable[Frame], step: int, between: list[Frame]) -> Iterator[Frame]:
    """Every ``step``-th frame of ``frames`` (by index); the others go into ``between`` without their image."""
    for frame in frames:
        if frame.index % step == 0:
            yield frame
        else:
            between.append(Frame(frame.index, frame.t, np.zeros((0, 0, 3), np.uint8), frame.pose))


def with_between(results: list[FrameResult], between: list[Frame]) -> tuple[list[FrameResult], list[int]]:
    """``results`` (analysed frames, in order) with a result for each frame of ``between`` inserted in frame order;
    and, for each returned result, the position in ``results`` of the analysed result it belongs to (itself, or the
    one before it: its road mask and scale are that frame's)."""
    out: list[FrameResult] = []
    owner: list[int] = []
    pending = sorted(between, key=lambda f: f.index)
    j = 0
    for k, r in enumerate(results):
        previous = results[k - 1] if k else None
        while j < len(pending) and pending[j].index < r.frame.index:
            out.append(_between_result(previous, r, pending[j]))
            owner.append(max(k - 1, 0))
            j += 1
        out.append(r)
        owner.append(k)
    last = results[-1] if results else None
    for frame in pending[j:]:  # frames after the last analysed one: nothing to interpolate towards
        out.append(_between_result(last, None, frame))
        owner.append(max(len(results) - 1, 0))
    return out, owner


def _between_result(a: FrameResult | None, b: FrameResult | None, frame: Frame) -> FrameResult:
    if a is None or b is None:
        ref = a or b
        return FrameResult(
            frame, [], None, ref.metres_per_pixel if ref else None, ref.scale_source if ref else None, {}
        )
    span = b.frame.t - a.frame.t
    w = (frame.t - a.frame.t) / span if span > 0 else 0.5
    to_first = None
    if a.to_first is not None and b.to_first is not None:
        m = (1 - w) * a.to_first / a.to_first[2, 2] + w * b.to_first / b.to_first[2, 2]
        to_first = m / m[2, 2]
    from_first = np.linalg.inv(to_first) if to_first is not None else None
    after = {tr.track_id: tr for tr in b.tracks}
    tracks = []
    for before in a.tracks:
        other = after.get(before.track_id)
        if other is None:
            continue
        centre = None
        if from_first is not None:
            ends = (in_first_frame(a, before), in_first_frame(b, other))
            centre = _through(from_first, (1 - w) * ends[0] + w * ends[1])
        tracks.append(dataclasses.replace(interpolated(before, other, w, centre), measured=False))
    return FrameResult(frame, tracks, None, a.metres_per_pixel, a.scale_source, {}, a.scale_detail, to_first=to_first)
