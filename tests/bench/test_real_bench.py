"""bench/real: leave-one-sequence-out choice, targets and report from given results (no runs)."""

from __future__ import annotations

from bench.real.__main__ import DUAL_CANDIDATES, leave_one_out, targets, write_markdown
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
            "plain": {"0.1": _r(60), "0.2": _r(58)},
            "plain_1024": _r(65),
            "baseline": _r(59),
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


def test_targets_compare_with_the_best_plain_conf_and_check_fp_and_time():
    res = _results(
        day={k: _r(64, fp=9, ms=60) for k in DUAL_CANDIDATES}, night={k: _r(70, fp=11, ms=70) for k in DUAL_CANDIDATES}
    )
    met = {what: ok for what, _, ok in targets(res, leave_one_out(res))}

    def ok(prefix: str) -> bool:
        return next(v for k, v in met.items() if k.startswith(prefix))

    assert ok("A: dual >= plain") is True  # +4 over the best plain (60), FP 9 <= 10
    assert ok("B: dual >= plain") is False  # +10 but more false positives than plain
    assert ok("B: night MOTA") is True
    assert ok("A: time") is True and ok("B: time") is False  # 1.2x and 1.4x
    assert ok("pooled") is True


def test_the_report_names_the_split_and_the_choice(tmp_path):
    res = _results(day={"default": _r(70)}, night={"default": _r(40)})
    write_markdown(res, leave_one_out(res), tmp_path / "a.md", "python -m bench.real")
    text = tmp_path / "a.md"
    body = text.read_text()
    assert "Leave-one-sequence-out" in body and f"frames {NIGHT_TRAIN_FRAMES[0]}-{NIGHT_TRAIN_FRAMES[1]}" in body
    assert body.count("| A (day") >= 3


def test_night_scored_frames_never_overlap_the_training_frames():
    assert NIGHT_SCORED_FRAMES[1] + 60 < NIGHT_TRAIN_FRAMES[0]  # at least 2 s apart at 30 fps
    for seq in real_sequences():  # present only where ../shared is
        if seq.condition == "night":
            assert seq.frames == NIGHT_SCORED_FRAMES
