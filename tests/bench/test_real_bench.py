"""bench/real: leave-one-sequence-out choice, targets and report from given results (no runs)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.real.__main__ import DUAL_CANDIDATES, best_plain, layer_effects, leave_one_out, targets, write_markdown
from bench.real.sequences import NIGHT_SCORED_FRAMES, NIGHT_TRAIN_FRAMES, real_sequences


def _r(mota: float, fp: int = 10, gt: int = 1000, ms: float = 50.0) -> dict:
    return {
        "mota": mota,
        "idf1": mota,
        "hota": None,
        "fp": fp,
        "fn": int((100 - mota) * gt / 100) - fp,
        "idsw": 0,
        "gt_boxes": gt,
        "ms_per_frame": ms,
    }


def _results(day: dict, night: dict) -> dict:
    seqs = {}
    for name, cond, dual in (("A", "day", day), ("B", "night", night)):
        seqs[name] = {
            "frames": [1, 10],
            "condition": cond,
            "plain": {"bytetrack": {"0.1": _r(60), "0.2": _r(58)}, "botsort": {"0.1": _r(57), "0.2": _r(59)}},
            "dual": {k: dual.get(k, _r(20)) for k in DUAL_CANDIDATES},
        }
    return {
        "sequences": seqs,
        "weights": "w.pt",
        "weights_sha256_12": "abc",
        "night_split": {"scored": NIGHT_SCORED_FRAMES, "detector_training": NIGHT_TRAIN_FRAMES},
    }


def test_each_sequence_gets_the_setting_that_was_best_on_the_other():
    res = _results(day={"default": _r(70), "no-road": _r(80)}, night={"default": _r(40), "no-road": _r(30)})
    assert leave_one_out(res) == {"A": "default", "B": "no-road"}


def test_the_strongest_plain_is_the_best_tracker_and_conf_on_that_sequence():
    res = _results(day={}, night={})
    res["sequences"]["A"]["plain"]["botsort"]["0.2"] = _r(61, fp=12)
    best = best_plain(res["sequences"]["A"])
    assert (best["tracker"], best["conf"], best["mota"]) == ("botsort", 0.2, 61)
    assert best_plain(res["sequences"]["B"])["tracker"] == "bytetrack"


def test_targets_compare_with_the_best_plain_and_check_fp_and_interchange_cost():
    res = _results(
        day={k: _r(64, fp=9, ms=60) for k in DUAL_CANDIDATES}, night={k: _r(70, fp=11, ms=70) for k in DUAL_CANDIDATES}
    )
    res["interchange"] = {
        "plain": {"vehicles": 2, "cpu": 100.0},
        "dual": {"vehicles": 95, "cpu": 240.0},
        "native": {"vehicles": 104, "cpu": 900.0},
    }
    met = {what: ok for what, _, ok in targets(res, leave_one_out(res))}

    def ok(prefix: str) -> bool:
        return next(v for k, v in met.items() if k.startswith(prefix))

    assert ok("A: dual >= the better plain") is True  # +4 over the best plain (60), FP 9 <= 10
    assert ok("B: dual >= the better plain") is False  # +10 but more false positives than plain
    assert ok("B: night MOTA") is True
    assert ok("1080p nadir interchange: CPU") is True  # 2.4x
    assert ok("1080p nadir interchange: >= 90") is True  # 95 of 104
    assert ok("pooled") is True


def test_the_report_names_the_split_and_the_choice(tmp_path):
    res = _results(day={"default": _r(70)}, night={"default": _r(40)})
    write_markdown(res, leave_one_out(res), tmp_path / "a.md", "python -m bench.real")
    text = tmp_path / "a.md"
    body = text.read_text()
    assert "Leave-one-sequence-out" in body and f"frames {NIGHT_TRAIN_FRAMES[0]}-{NIGHT_TRAIN_FRAMES[1]}" in body
    assert body.count("| A (day") >= 3


def test_layer_effect_is_default_minus_the_run_without_the_layer():
    res = _results(day={"default": _r(70), "no-road": _r(71), "no-motion": _r(65)}, night={})
    eff = layer_effects(res)
    assert round(eff["road"]["A"], 6) == -1 and round(eff["motion"]["A"], 6) == 5


def test_night_scored_frames_never_overlap_the_training_frames():
    assert NIGHT_SCORED_FRAMES[1] + 60 < NIGHT_TRAIN_FRAMES[0]  # at least 2 s apart at 30 fps
    for seq in real_sequences():  # present only where ../shared is
        if seq.condition == "night":
            assert seq.frames == NIGHT_SCORED_FRAMES


def test_the_interchange_target_counts_matched_vehicles_not_any_track():
    """95 tracks >= 1 s against the reference's 104 would pass on the old count; only 80 of them follow a reference
    vehicle, so the 90 % target is missed."""
    res = _results(day={k: _r(64) for k in DUAL_CANDIDATES}, night={k: _r(70) for k in DUAL_CANDIDATES})
    matched = {"tracks": 95, "reference_vehicles": 104, "found_matched": 80, "extra": 15}
    res["interchange"] = {
        "plain": {"vehicles": 2, "cpu": 100.0, "matched": {**matched, "found_matched": 2}},
        "dual": {"vehicles": 95, "cpu": 240.0, "matched": matched},
        "native": {"vehicles": 104, "cpu": 900.0},
    }
    got = {what: (measured, ok) for what, measured, ok in targets(res, leave_one_out(res))}
    measured, ok = next(v for k, v in got.items() if k.startswith("1080p nadir interchange: >= 90"))
    assert ok is False and "80 of 104 found and matched" in measured and "15 extra" in measured


@pytest.mark.slow
def test_the_one_pass_sweep_gives_exactly_what_ultralytics_track_gives():
    from dataclasses import replace

    from bench.real.contenders import run_plain, run_plain_sweep
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    seq = next((s for s in real_sequences() if s.name == "M0703-nadir"), None)
    if seq is None:
        pytest.skip("../shared/data/mot/uavdt_M0703_nadir_dev absent")
    seq = replace(seq, frames=(1, 12))
    sweep = run_plain_sweep(seq, DEFAULT_DETECTOR_WEIGHTS, [0.1, 0.3])
    for tracker, conf in (("botsort", 0.3), ("bytetrack", 0.1)):
        a, b = sweep[(tracker, conf)].pred, run_plain(seq, DEFAULT_DETECTOR_WEIGHTS, conf, tracker=tracker).pred
        assert len(a) > 0 and np.array_equal(a.frame, b.frame) and np.array_equal(a.ids, b.ids)
        assert np.allclose(a.xywh, b.xywh, atol=1e-3)
