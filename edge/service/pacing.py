"""Pacing a live stream the CPU cannot keep up with: which arriving frames go to the pipeline, decided from the load.

Without pacing, a stream whose frames arrive faster than the pipeline takes them loses whatever its bounded queue
drops (the oldest frame when it is full): which frames survive depends on when the worker happens to finish one, so
the pipeline sees uneven gaps (1, 2, 5 frames apart) and the queue is always full (its length in latency). The pacer
keeps every k-th arriving frame, evenly, with k chosen so that the worker keeps up with what is kept: at
``arrival_fps / k`` frames per second and the measured seconds per processed frame it is busy about
``target_utilisation`` of the time (nearly all of it: an idle worker is frames not processed). The tracker then
sees a steady frame rate (the worker tells the pipeline which), and the queue stays short. The bounded frame
queue (``ingest.FrameQueue``) stays underneath as the safety net for bursts and for the first frames, before any
cost is measured.

``PacingPolicy.keep_every`` is the decision alone (typed load in, k out); ``FramePacer`` measures the load of one
stream (arrival times and the frames' own times, processing time per frame, queue depth) and
applies the decision to each arriving frame.
"""

from __future__ import annotations

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
    target_utilisation: float = 0.92  # k is set so that the worker is busy this share of the time...
    high_utilisation: float = 1.0  # ...at once when it would be busier than this and frames wait (it falls behind)
    relax_utilisation: float = 0.8  # ...and after settle_s when it would be idle more than a fifth of the time
    settle_s: float = 2.0  # k is lowered (or raised for a queue backlog) at most once per this many seconds
    backlog_frames: int = 3  # this many frames waiting: the measured cost is behind the real one, k up by a step
    backlog_step: float = 1.15
    max_keep_every: float = 25.0  # at 25 fps: at least one frame a second is processed (beyond, the queue drops)

    def keep_every(self, load: Load, current: float) -> float:
        """Keep every k-th arriving frame (k fractional: 2.5 keeps frames 2 and 3 apart in turn): k for the next
        frames, given the load and the current k."""
        if load.arrival_fps <= 0 or load.process_s <= 0:
            return current
        need = load.arrival_fps * load.process_s  # frames arriving while one is processed
        k, busy = current, need / current
        # busier than it can be: raised at once, if frames are waiting (a source that sends each frame only when
        # the last one is done, as a test or a careful client does, looks 100 % busy and never falls behind)
        if busy > self.high_utilisation and load.queue_depth >= 1:
            k = need / self.target_utilisation
        elif load.since_change_s >= self.settle_s:
            if load.queue_depth >= self.backlog_frames:
                k = current * self.backlog_step
            elif busy < self.relax_utilisation:
                k = need / self.target_utilisation
        return round(max(1.0, min(k, self.max_keep_every)), 2)


class FramePacer:
    """One stream's pacer. ``admit(now)`` for every arriving frame (False: shed it); ``processed(seconds,
    queue_depth, now)`` after every processed frame (the decision is made there). Times from one monotonic clock.

    A frame is kept when ``keep_every`` frames have arrived since the last kept one (counting itself; a fractional
    k keeps frames floor(k) and ceil(k) apart, in the proportion that averages k), so kept frames are evenly spaced
    in the stream whatever k is and however often it changes."""

    def __init__(self, policy: PacingPolicy | None = None, window: int = 25, warm_up_frames: int = 2):
        self.policy = policy or PacingPolicy()
        self.keep_every = 1.0
        self.shed = 0  # frames not given to the pipeline
        self._arrivals: deque[float] = deque(maxlen=window)
        self._stream_times: deque[float] = deque(maxlen=window)  # the same frames' own times, where given
        self._costs: deque[float] = deque(maxlen=window)
        self._warm_up = warm_up_frames  # the first frames' cost is model loading and first-run work, not the load
        self._credit: float | None = None  # frames arrived since the last kept one, against keep_every
        self._changed_at: float | None = None

    def admit(self, now: float, t: float | None = None) -> bool:
        """``t``: the frame's own time (stream seconds), where known: see ``arrival_fps``."""
        self._arrivals.append(now)
        if t is not None:
            self._stream_times.append(t)
        if self._credit is None:
            self._credit = 0.0
            return True
        self._credit += 1.0
        if self._credit >= self.keep_every - 1e-9:
            self._credit -= self.keep_every
            return True
        self.shed += 1
        return False

    @property
    def arrival_fps(self) -> float:
        """Frames a second arriving, over the last ``window`` frames: by the clock, or by the frames' own times where
        that is slower. A burst (a reader's one-second probe at the stream's start, a connection catching up)
        arrives in a moment but is a second of stream; counted by the clock it would read as hundreds of frames a
        second and set k at its cap for the seconds after it."""
        a, s = self._arrivals, self._stream_times
        by_clock = (len(a) - 1) / (a[-1] - a[0]) if len(a) >= 3 and a[-1] > a[0] else 0.0
        if len(s) == len(a) and len(s) >= 3 and s[-1] > s[0]:
            return min(by_clock, (len(s) - 1) / (s[-1] - s[0])) if by_clock else 0.0
        return by_clock

    @property
    def process_s(self) -> float:
        return sum(self._costs) / len(self._costs) if self._costs else 0.0

    def processed(self, seconds: float, queue_depth: int, now: float) -> float:
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
            if self._credit is not None:  # a lowered k takes effect at the next frame
                self._credit = min(self._credit, k)
        return k
