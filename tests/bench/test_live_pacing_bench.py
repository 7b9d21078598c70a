"""bench/live_pacing.py: how a live run is scored against the ground truth and the recorded run (no streams)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.live_pacing import score
from tracking.evaluation.io import Boxes

FRAMES = 90  # 3 s at 30 fps


def _boxes(frames: list[int], id_offset: int = 0) -> Boxes:
    """Three vehicles, 40x20 px, driving 2 px a frame, on the given (1-based) frames."""
    rows = [(f, v + 1 + id_offset, 100.0 + 2 * f, 100.0 + 80 * v, 40.0, 20.0) for f in frames for v in range(3)]
    a = np.array(rows, np.float64)
    return Boxes(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2:6])


@dataclass
class _Sequence:
    run_frames: int = FRAMES

    def ground_truth(self) -> tuple[Boxes, Boxes]:
        return _boxes(list(range(1, FRAMES + 1))), Boxes()


def _run(frames: list[int], id_offset: int, speed: float) -> dict:
    pred = _boxes(frames, id_offset)
    speeds = {(int(f), int(i)): speed for f, i in zip(pred.frame, pred.ids)}
    return {"pred": pred, "speeds": speeds, "frames": frames}


def test_a_live_run_on_every_third_frame_that_follows_every_vehicle_finds_them_all():
    recorded = _run(list(range(1, FRAMES + 1)), 10, 50.0)
    live = _run(list(range(1, FRAMES + 1, 3)), 20, 53.0)
    out = score(live, recorded, _Sequence(), 30.0)  # type: ignore[arg-type]  # a stand-in for bench.real's Sequence
    assert out["frames"] == 30 and out["mota"] == 100.0
    assert out["gt_vehicles"] == out["gt_vehicles_found"] == 3  # counted in seconds at the rate it processed
    assert out["recorded_vehicles"] == out["recorded_vehicles_found"] == 3 and out["found_share"] == 1.0
    assert out["speed_diff_kmh"] == {"pairs": 3, "median_abs": 3.0, "median": 3.0}


def test_a_live_run_that_lost_a_vehicle_finds_two_thirds():
    recorded = _run(list(range(1, FRAMES + 1)), 10, 50.0)
    live = _run(list(range(1, FRAMES + 1, 3)), 20, 50.0)
    keep = live["pred"].ids != 21  # its first vehicle never tracked
    live["pred"] = live["pred"].subset(keep)
    out = score(live, recorded, _Sequence(), 30.0)  # type: ignore[arg-type]
    assert out["recorded_vehicles_found"] == 2 and round(out["found_share"], 2) == 0.67
    assert out["mota"] < 100.0
