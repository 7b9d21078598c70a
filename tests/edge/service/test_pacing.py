"""The live pacer alone: which k (keep every k-th frame) a load asks for, and that shed frames are evenly spaced."""

from __future__ import annotations

from edge.service.pacing import FramePacer, Load, PacingPolicy

POLICY = PacingPolicy()


def load(fps: float, cost_s: float, queue: int = 0, since_s: float = 10.0) -> Load:
    return Load(arrival_fps=fps, process_s=cost_s, queue_depth=queue, since_change_s=since_s)


def test_a_worker_that_keeps_up_processes_every_frame():
    assert POLICY.keep_every(load(25, 0.02), 1) == 1  # 50 % busy
    assert POLICY.keep_every(load(0, 0.5), 1) == 1  # nothing measured yet: no change
    assert POLICY.keep_every(load(25, 0.0), 3) == 3


def test_a_slow_worker_raises_k_at_once_to_fit_the_target_utilisation():
    # 1080p at 25 fps, 125 ms per frame (8 fps): 3.1 frames arrive per processed frame -> every 4th (busy 78 %)
    assert POLICY.keep_every(load(25, 0.125, since_s=0.0), 1) == 4
    assert POLICY.keep_every(load(30, 0.1, since_s=0.0), 2) == 4  # 3 / 0.85 -> 4, however recent the last change
    assert POLICY.keep_every(load(25, 10.0, since_s=0.0), 1) == POLICY.max_keep_every  # capped


def test_k_comes_down_only_with_headroom_and_not_too_often():
    # need 2.5 frames per processed one: k 3 is 83 % busy (< 85 %: kept); k 4 would not be lowered to 3 (3 is
    # above the 65 % a lower k must reach), only to k at which the worker idles a third of the time
    assert POLICY.keep_every(load(25, 0.1), 3) == 3
    assert POLICY.keep_every(load(25, 0.1), 5) == 4  # 2.5 / 0.65 -> 4
    assert POLICY.keep_every(load(25, 0.02), 5) == 1  # the load went away: straight down
    assert POLICY.keep_every(load(25, 0.02, since_s=0.5), 5) == 5  # changed half a second ago: wait


def test_a_growing_queue_raises_k_one_step():
    assert POLICY.keep_every(load(25, 0.03, queue=3), 2) == 3  # the measured cost says 2 is enough; the queue not
    assert POLICY.keep_every(load(25, 0.03, queue=3, since_s=0.5), 2) == 2  # not again before the last step settled


def test_the_pacer_keeps_every_kth_frame_evenly_and_adapts_k_to_the_measured_load():
    pacer = FramePacer(warm_up_frames=0)
    now, kept = 0.0, []
    busy_until = 0.0
    for i in range(500):  # 20 s at 25 fps, the worker takes 0.1 s per frame
        now = i / 25
        if pacer.admit(now):
            kept.append(i)
            start = max(now, busy_until)
            busy_until = start + 0.1
            pacer.processed(0.1, 0, busy_until)
    assert pacer.keep_every == 3  # 2.5 frames arrive per frame processed: every 3rd, 83 % busy
    gaps = [b - a for a, b in zip(kept, kept[1:])]
    assert set(gaps[10:]) == {3}  # once settled: evenly spaced, never bunched
    assert pacer.shed == 500 - len(kept)
    assert 24 <= pacer.arrival_fps <= 26 and abs(pacer.process_s - 0.1) < 1e-9


def test_warm_up_frames_do_not_count():
    pacer = FramePacer(warm_up_frames=2)
    for i in range(5):
        assert pacer.admit(i / 25)
    pacer.processed(3.0, 0, 0.2)  # loading the model
    pacer.processed(1.0, 0, 0.2)
    assert pacer.keep_every == 1 and pacer.process_s == 0.0
    pacer.processed(0.01, 0, 0.3)
    assert pacer.keep_every == 1
