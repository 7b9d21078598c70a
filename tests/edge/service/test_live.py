"""Live outputs: the violation rule (time above the limit, trusted speeds only, once per track) and the fan-out to
clients (a slow client loses its own oldest messages)."""

from __future__ import annotations

import asyncio

import numpy as np

from edge.service.live import Broadcaster, LiveViolations
from tracking.types import FrameResult, TrackState
from vision.types import Frame


def _result(t: float, *tracks: tuple[int, float, str | None]) -> FrameResult:
    frame = Frame(int(t * 25), t, np.zeros((4, 4, 3), np.uint8))
    return FrameResult(
        frame,
        [
            TrackState(tid, np.array([0, 0, 2, 2], np.float32), 0.9, 0, speed_kmh=v, speed_flag=flag)
            for tid, v, flag in tracks
        ],
    )


def test_violation_needs_time_above_the_limit_and_a_trusted_speed():
    rule = LiveViolations(limit_kmh=50, min_over_s=1.0)
    events = []
    for i in range(30):  # 1.2 s of frames at 25 fps
        events += rule.update(
            _result(i / 25, (1, 60.0, None), (2, 45.0, None), (3, 90.0, "low_confidence_scale")), 0.04
        )
    assert [(e["track_id"], e["frame"]) for e in events] == [(1, 24)]  # after 25 frames = 1.0 s, and only once


def test_size_prior_speeds_count_only_when_over_the_limit_by_two_sigma():
    rule = LiveViolations(limit_kmh=50, min_over_s=0.2)

    def result(t):
        r = _result(t, (1, 80.0, "low_confidence_scale"), (2, 60.0, "low_confidence_scale"))
        r.tracks[0].speed_sigma_kmh, r.tracks[1].speed_sigma_kmh = 10.0, 8.0  # 60 > 50; 44 < 50
        return r

    events = [e for i in range(10) for e in rule.update(result(i / 25), 0.04)]
    assert [e["track_id"] for e in events] == [1]
    assert events[0]["sigma_kmh"] == 10.0 and events[0]["rule"] == "speed - 2 sigma > limit for at least 0.2 s"


def test_dropped_frames_still_count_the_time_they_cover():
    rule = LiveViolations(limit_kmh=50, min_over_s=1.0)
    # processing keeps up with 2 frames per second only: each processed frame stands for 0.5 s
    events = [e for i in range(3) for e in rule.update(_result(i * 0.5, (7, 70.0, None)), 0.5)]
    assert [e["track_id"] for e in events] == [7] and events[0]["t"] == 0.5


def test_no_limit_no_violations():
    assert LiveViolations(None, 1.0).update(_result(0.0, (1, 300.0, None)), 10.0) == []


def test_slow_subscriber_loses_its_oldest_messages_only():
    async def scenario():
        hub = Broadcaster()
        slow, fast = hub.subscribe(maxsize=3), hub.subscribe(maxsize=100)
        for i in range(10):
            hub.publish(i)
        await asyncio.sleep(0)  # let the loop deliver
        got_slow = [slow.queue.get_nowait() for _ in range(slow.queue.qsize())]
        got_fast = [fast.queue.get_nowait() for _ in range(fast.queue.qsize())]
        hub.unsubscribe(slow)
        hub.publish(10)
        await asyncio.sleep(0)
        return got_slow, got_fast, slow.queue.qsize(), fast.queue.qsize()

    got_slow, got_fast, slow_after, fast_after = asyncio.run(scenario())
    assert got_slow == [7, 8, 9] and got_fast == list(range(10))
    assert slow_after == 0 and fast_after == 1
