"""Live results out: JSON messages per processed frame, fan-out to WebSocket/MJPEG clients, live violations.

The stream worker thread produces; asyncio clients consume. Each client has its own small queue that drops its
oldest message when the client is slow, so one slow browser never holds up the worker or the other clients.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from dataclasses import dataclass, field

from tracking.types import FrameResult, TrackState, lower_bound_kmh, trusted_speed, violation_rule
from vision.types import VEHICLE_CLASSES


def _num(x, nd: int = 2):
    return round(float(x), nd) if x is not None and math.isfinite(float(x)) else None


def class_name(cid: int) -> str:
    return VEHICLE_CLASSES[cid] if 0 <= cid < len(VEHICLE_CLASSES) else f"class_{cid}"


def track_json(tr: TrackState) -> dict:
    return {
        "id": tr.track_id,
        "class": class_name(int(tr.class_id)),
        "box": [_num(v, 1) for v in tr.xyxy],
        "score": _num(tr.score, 3),
        "moving": bool(tr.moving),
        "speed_kmh": _num(tr.speed_kmh, 1),
        "sigma_kmh": _num(tr.speed_sigma_kmh, 1),
        "flag": tr.speed_flag,
        "lat": _num(tr.lat, 7),
        "lon": _num(tr.lon, 7),
    }


class LiveViolations:
    """Same rule as ``db.sink.DatabaseSink``: a track is a violation once its speed minus 2 sigma has been above the
    limit (with a trusted speed) for ``min_over_s`` in total. Reported once per track, when it first qualifies. Each frame counts
    for the time it stands for (``frame_s``), which is more than 1/fps when frames were dropped."""

    def __init__(self, limit_kmh: float | None, min_over_s: float):
        self.limit, self.min_over_s = limit_kmh, min_over_s
        self._over_s: dict[int, float] = {}
        self._reported: set[int] = set()

    def update(self, result: FrameResult, frame_s: float) -> list[dict]:
        if not self.limit:
            return []
        events = []
        for tr in result.tracks:
            if (
                tr.speed_kmh is None
                or not math.isfinite(tr.speed_kmh)
                or not trusted_speed(tr.speed_flag, tr.speed_sigma_kmh)
            ):
                continue
            if lower_bound_kmh(tr.speed_kmh, tr.speed_sigma_kmh) <= self.limit or tr.track_id in self._reported:
                continue
            self._over_s[tr.track_id] = self._over_s.get(tr.track_id, 0.0) + frame_s
            if self._over_s[tr.track_id] + 1e-9 >= self.min_over_s:
                self._reported.add(tr.track_id)
                events.append(
                    {
                        "track_id": tr.track_id,
                        "speed_kmh": _num(tr.speed_kmh, 1),
                        "sigma_kmh": _num(tr.speed_sigma_kmh, 1),
                        "rule": violation_rule(self.min_over_s),
                        "scale_source": result.scale_source,
                        "limit_kmh": self.limit,
                        "t": _num(result.frame.t, 3),
                        "frame": result.frame.index,
                        "lat": _num(tr.lat, 7),
                        "lon": _num(tr.lon, 7),
                    }
                )
        return events


def result_message(
    stream_id: int, run_id: int | None, result: FrameResult, latency_ms: float, violations: list[dict], stats: dict
) -> str:
    return json.dumps(
        {
            "type": "result",
            "stream_id": stream_id,
            "run_id": run_id,
            "frame": result.frame.index,
            "t": _num(result.frame.t, 3),
            "latency_ms": _num(latency_ms, 1),
            "metres_per_pixel": _num(result.metres_per_pixel, 4),
            "scale_source": result.scale_source,
            "tracks": [track_json(tr) for tr in result.tracks],
            "violations": violations,
            "stats": stats,
        },
        allow_nan=False,
    )


@dataclass(eq=False)
class Subscription:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(maxsize=64))

    def offer(self, item) -> None:  # runs on the subscriber's loop
        if self.queue.full():
            self.queue.get_nowait()  # the client is slow: it loses the oldest message, never the newest
        self.queue.put_nowait(item)


class Broadcaster:
    """Thread-safe fan-out of messages to asyncio subscribers."""

    def __init__(self):
        self._subs: set[Subscription] = set()
        self._lock = threading.Lock()

    def subscribe(self, maxsize: int = 64) -> Subscription:
        sub = Subscription(asyncio.get_running_loop(), asyncio.Queue(maxsize=maxsize))
        with self._lock:
            self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._subs.discard(sub)

    def publish(self, item) -> None:
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            try:
                sub.loop.call_soon_threadsafe(sub.offer, item)
            except RuntimeError:  # its loop is closed: the client is gone
                self.unsubscribe(sub)

    def __len__(self) -> int:
        return len(self._subs)
