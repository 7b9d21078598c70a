"""The live pacer alone: which k (keep every k-th frame) a load asks for, and that kept frames are evenly spaced."""

from __future__ import annotations

from collections import deque

import pytest

from edge.service.pacing import FramePacer, Load, PacingPolicy

POLICY = PacingPolicy()


def load(fps: float, cost_s: float, queue: int = 1, since_s: float = 10.0) -> Load:
    return Load(arrival_fps=fps, process_s=cost_s, queue_depth=queue, since_change_s=since_s)


def test_a_worker_that_keeps_up_processes_every_frame():
    assert POLICY.keep_every(load(25, 0.02), 1) == 1  # 50 % busy
    assert POLICY.keep_every(load(25, 0.04, queue=0), 1) == 1  # 100 % busy, but nothing waits: it keeps up
    assert POLICY.keep_every(load(0, 0.5), 1) == 1  # nothing measured yet: no change
    assert POLICY.keep_every(load(25, 0.0), 3) == 3


def test_a_slow_worker_raises_k_at_once_to_the_target_utilisation():
    # 1080p at 25 fps, 125 ms per frame (8 fps): 3.1 frames arrive per processed frame -> every 3.4th (92 % busy)
    assert POLICY.keep_every(load(25, 0.125, since_s=0.0), 1) == pytest.approx(3.125 / 0.92, abs=0.01)
    assert POLICY.keep_every(load(30, 0.1, since_s=0.0), 2) == pytest.approx(3 / 0.92, abs=0.01)
    assert POLICY.keep_every(load(25, 10.0, since_s=0.0), 1) == POLICY.max_keep_every  # capped


def test_k_stays_inside_the_band_and_comes_down_only_when_settled():
    assert POLICY.keep_every(load(25, 0.1), 2.6) == 2.6  # 96 % busy: inside the band, no change
    assert POLICY.keep_every(load(25, 0.1), 3.0) == 3.0  # 83 %: inside too
    assert POLICY.keep_every(load(25, 0.1, queue=0), 4.0) == pytest.approx(2.5 / 0.92, abs=0.01)  # 62 %: down
    assert POLICY.keep_every(load(25, 0.02, queue=0), 5) == 1  # the load went away: straight down to every frame
    assert POLICY.keep_every(load(25, 0.02, queue=0, since_s=0.5), 5) == 5  # changed half a second ago: wait


def test_a_growing_queue_raises_k_a_step():
    assert POLICY.keep_every(load(25, 0.09, queue=3), 2.6) == pytest.approx(2.6 * 1.15, abs=0.01)
    assert POLICY.keep_every(load(25, 0.09, queue=3, since_s=0.5), 2.6) == 2.6  # not before the last step settled


def simulate(cost_s: float, seconds: float = 30.0, fps: float = 25.0, lock_step: bool = False):
    """A source at ``fps`` (or, ``lock_step``, one that sends the next frame when the last one is done) and a worker
    taking ``cost_s`` per frame, in 1 ms steps: the pacer and the frames the worker processed."""
    pacer, queue, kept = FramePacer(warm_up_frames=0), deque[int](), list[int]()
    busy_until: float | None = None
    arrivals, next_at = 0, 0.0
    for step in range(int(seconds * 1000)):
        now = step / 1000
        if busy_until is not None and now >= busy_until:
            busy_until = None
            pacer.processed(cost_s, len(queue), now)
            if lock_step:
                next_at = now
        if now >= next_at - 1e-9 and (not lock_step or (busy_until is None and not queue)):
            if pacer.admit(now):
                queue.append(arrivals)
            arrivals += 1
            next_at = now + 1 / fps if not lock_step else float("inf")
        if busy_until is None and queue:
            kept.append(queue.popleft())
            busy_until = now + cost_s
    return pacer, kept, arrivals


@pytest.mark.parametrize("cost_s", [0.1, 0.13, 0.3])
def test_the_pacer_keeps_frames_evenly_at_the_rate_the_worker_sustains(cost_s):
    pacer, kept, arrived = simulate(cost_s)
    k = 25 * cost_s / 0.92
    assert pacer.keep_every == pytest.approx(k, rel=0.05)
    gaps = [b - a for a, b in zip(kept, kept[1:])][30:]  # once settled
    assert set(gaps) <= {int(k), int(k) + 1}  # evenly spaced: floor(k) and ceil(k) apart, never bunched
    assert sum(gaps) / len(gaps) == pytest.approx(k, rel=0.05)
    assert pacer.shed == arrived - len(kept)
    assert 24 <= pacer.arrival_fps <= 26 and pacer.process_s == pytest.approx(cost_s)


def test_a_source_that_waits_for_each_result_is_never_shed():
    pacer, kept, arrived = simulate(0.1, lock_step=True)
    assert pacer.shed == 0 and pacer.keep_every == 1 and len(kept) == arrived > 250


def test_warm_up_frames_do_not_count():
    pacer = FramePacer(warm_up_frames=2)
    for i in range(5):
        assert pacer.admit(i / 25)
    pacer.processed(3.0, 0, 0.2)  # loading the model
    pacer.processed(1.0, 0, 0.2)
    assert pacer.keep_every == 1 and pacer.process_s == 0.0
    pacer.processed(0.01, 0, 0.3)
    assert pacer.keep_every == 1


def test_a_burst_of_a_second_of_stream_is_not_read_as_a_faster_source():
    # the reader's probe hands over the first second (25 frames) within 50 ms, then frames come at 25 fps
    pacer = FramePacer(warm_up_frames=0)
    times = [(i * 0.002, i / 25) for i in range(25)] + [(0.05 + (i + 1) / 25, 1 + i / 25) for i in range(5)]
    for now, t in times:
        pacer.admit(now, t)
    assert 24 <= pacer.arrival_fps <= 26  # by the clock alone (below): the last 25 frames in 0.24 s, 100 a second
    pacer.processed(0.1, 1, 0.3)
    assert pacer.keep_every == pytest.approx(25 * 0.1 / 0.92, abs=0.1)  # not at its cap of 25
    clock_only = FramePacer(warm_up_frames=0)
    for now, _ in times:
        clock_only.admit(now)
    assert clock_only.arrival_fps > 90
    # a source slower than its timestamps (frames stamped 25 fps, arriving 10 a second): the clock's rate
    slow = FramePacer(warm_up_frames=0)
    for i in range(20):
        slow.admit(i / 10, i / 25)
    assert 9 <= slow.arrival_fps <= 11
