"""Pacing a live stream the CPU cannot keep up with: which arriving frames go to the pipeline, decided from the load.

Without pacing, a stream whose frames arrive faster than the pipeline takes them loses whatever its bounded queue
drops (the oldest frame when it is full): which frames survive depends on when the worker happens to finish one, so
the pipeline sees uneven gaps (1, 2, 5 frames apart) and the queue is always full (its length in latency). The pacer
keeps every k-th arriving frame, evenly, with k chosen so that the worker keeps up with what is kept: at
``arrival_fps / k`` frames per second and the measured seconds per processed frame it is busy at most
``target_utilisation`` of the time. The tracker then sees a steady frame rate (the worker tells the pipeline which),
and the queue stays short. The drop-oldest queue stays underneath as the safety net for bursts.

``PacingPolicy.keep_every`` is the decision alone (typed load in, k out); ``FramePacer`` measures the load of one
stream (arrival times, processing time per frame, queue depth) and applies the decision to each arriving frame.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Load:
    """What one stream asks of its worker now."""

    arrival_fps: float  # frames per second arriving from the source (measured)
    process_s: float  # seconds the worker spends per processed frame (recent mean, detector frames and coasted ones)
    queue_depth: int  # frames waiting for the worker
    since_change_s: float  # seconds since keep_every last changed


@dataclass(frozen=True)
class PacingPolicy:
    target_utilisation: float = 0.85  # k is raised at once when the worker would be busy more than this share
    relax_utilisation: float = 0.65  # and lowered only to a k at which it would be busy at most this share
    settle_s: float = 2.0  # k is lowered (or raised for a queue backlog) at most once per this many seconds
    backlog_frames: int = 2  # this many frames waiting: the measured cost is behind the real one, one step up
    max_keep_every: int = 25  # at 25 fps: at least one frame a second is processed (beyond, the queue drops)

    def keep_every(self, load: Load, current: int) -> int:
        """Keep every k-th arriving frame: k for the next frames, given the load and the current k."""
        if load.arrival_fps <= 0 or load.process_s <= 0:
            return current
        need = load.arrival_fps * load.process_s  # frames arriving while one is processed
        k = current
        if need / current > self.target_utilisation:
            k = math.ceil(need / self.target_utilisation)
        elif load.since_change_s >= self.settle_s:
            if load.queue_depth >= self.backlog_frames:
                k = current + 1
            else:
                k = min(current, max(1, math.ceil(need / self.relax_utilisation)))
        return max(1, min(k, self.max_keep_every))


class FramePacer:
    """One stream's pacer. ``admit(now)`` for every arriving frame (False: shed it); ``processed(seconds,
    queue_depth, now)`` after every processed frame (the decision is made there). Times from one monotonic clock.

    A frame is kept when at least ``keep_every`` frames have arrived since the last kept one (counting itself), so
    kept frames are evenly spaced in the stream whatever k is and however often it changes."""

    def __init__(self, policy: PacingPolicy | None = None, window: int = 25, warm_up_frames: int = 2):
        self.policy = policy or PacingPolicy()
        self.keep_every = 1
        self.shed = 0  # frames not given to the pipeline
        self._arrivals: deque[float] = deque(maxlen=window)
        self._costs: deque[float] = deque(maxlen=window)
        self._warm_up = warm_up_frames  # the first frames' cost is model loading and first-run work, not the load
        self._since_kept: int | None = None
        self._changed_at: float | None = None

    def admit(self, now: float) -> bool:
        self._arrivals.append(now)
        if self._since_kept is None or self._since_kept + 1 >= self.keep_every:
            self._since_kept = 0
            return True
        self._since_kept += 1
        self.shed += 1
        return False

    @property
    def arrival_fps(self) -> float:
        a = self._arrivals
        return (len(a) - 1) / (a[-1] - a[0]) if len(a) >= 3 and a[-1] > a[0] else 0.0

    @property
    def process_s(self) -> float:
        return sum(self._costs) / len(self._costs) if self._costs else 0.0

    def processed(self, seconds: float, queue_depth: int, now: float) -> int:
        """Record one processed frame's cost; returns keep_every for the frames that arrive next."""
        if self._warm_up > 0:
            self._warm_up -= 1
            return self.keep_every
        self._costs.append(seconds)
        if self._changed_at is None:
            self._changed_at = now
        load = Load(self.arrival_fps, self.process_s, queue_depth, now - self._changed_at)
        k = self.policy.keep_every(load, self.keep_every)
        if k != self.keep_every:
            self.keep_every, self._changed_at = k, now
        return k
