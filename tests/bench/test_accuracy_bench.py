"""bench/accuracy: the suite definition (deterministic, covers every factor) and the report writer on fake results.
No pipeline runs here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # bench/ is not an installed package

from bench.accuracy import report, suite  # noqa: E402
from bench.accuracy.execute import Prepared, _truncated_uavdt, condense  # noqa: E402


def _dump(seqs):
    return [(s.name, s.group, s.scene_config.model_dump(mode="json") if s.scene_config else None) for s in seqs]


def test_suite_is_deterministic_and_names_are_unique():
    a, b = suite.build_suite(), suite.build_suite()
    assert _dump(a) == _dump(b)
    names = [s.name for s in a]
    assert len(names) == len(set(names))


def test_suite_covers_every_factor_level():
    seqs = suite.synthetic_suite()
    cfgs = [s.scene_config for s in seqs]
    assert {c.scene for c in cfgs} == {"intersection", "rural", "highway"}
    assert {c.altitude_m for c in cfgs} == {40.0, 80.0, 120.0}
    assert {(c.width, c.height) for c in cfgs} == {(1280, 720), (1920, 1080)}
    assert {c.jitter_deg > 0 for c in cfgs} == {True, False}
    # altitude grid: every scene at every altitude, same resolution and camera motion
    grid = {(s.scene, s.altitude_m) for s in seqs if s.group == "A"}
    assert grid == {(sc, alt) for sc in suite.SCENES for alt in suite.ALTITUDES_M}
    assert {(s.width, s.jitter) for s in seqs if s.group == "A"} == {(1280, False)}
    # pairs differ from their reference only in the varied factor: same seed, same traffic
    for s in seqs:
        assert s.scene_config.seed == suite.SCENE_SEEDS[s.scene]
        assert s.scene_config.frame_count == suite.DEFAULT_FRAMES
        steady = s.scene_config.drift_mps == 0 and s.scene_config.jitter_deg == 0
        assert steady == (not s.jitter)


def test_quick_suite_and_uavdt(tmp_path):
    quick = suite.build_suite(quick=True)
    assert [s.name for s in quick] == list(suite.QUICK_NAMES)
    assert all(s.frames == suite.QUICK_FRAMES for s in quick)
    assert suite.build_suite(quick=True, shared_dir=tmp_path) == quick  # no UAVDT in an empty shared folder
    gt = tmp_path / "data" / "mot" / "uavdt_M1303" / "gt"
    gt.mkdir(parents=True)
    (gt / "M1303_gt_whole.txt").write_text("1,1,10,10,5,5,1,1,1\n3,1,12,10,5,5,1,1,1\n")
    (gt / "M1303_gt_ignore.txt").write_text("2,9,0,0,4,4,1,-1,-1\n")
    full = suite.build_suite(shared_dir=tmp_path, uavdt_frames=2)
    assert full[-1].kind == "uavdt" and full[-1].frames == 2
    cut = _truncated_uavdt(full[-1], tmp_path / "work")
    assert cut.read_text().splitlines() == ["1,1,10,10,5,5,1,1,1"]  # frame 3 is beyond the 2 processed frames
    assert (cut.parent / "M1303_gt_ignore.txt").read_text().strip() == "2,9,0,0,4,4,1,-1,-1"
    with pytest.raises(suite.SuiteError, match="unknown sequence"):
        suite.build_suite(only=["nowhere-999m"])


def _metrics(gt, fp, fn, sw, frames, idr, preds, mae=None, n=0, ms=100.0):
    return {
        "num_objects": gt,
        "num_false_positives": fp,
        "num_misses": fn,
        "num_switches": sw,
        "num_frames": frames,
        "num_predictions": preds,
        "idr": idr,
        "mota": 1 - (fp + fn + sw) / gt,
        "idf1": 2 * idr * gt / (gt + preds),
        "fp_per_frame": fp / frames,
        "fn_per_frame": fn / frames,
        "ms_per_frame": ms,
        "speed": {"n": n, "mae_kmh": mae, "mape_pct": None if mae is None else mae * 2, "n_pct": n},
    }


def _fake_results():
    recs = []
    for i, (scene, alt, res, jit) in enumerate(
        [
            ("highway", 40.0, "1280x720", False),
            ("highway", 80.0, "1280x720", False),
            ("highway", 80.0, "1920x1080", False),
            ("highway", 80.0, "1280x720", True),
        ]
    ):
        recs.append(
            {
                "name": f"seq{i}",
                "kind": "synthetic",
                "group": "A",
                "frames": 10,
                "factors": {"scene": scene, "altitude_m": alt, "resolution": res, "jitter": jit},
                "modes": {
                    "dual": _metrics(100, 2, 10 + i, 1, 10, 0.8, 92, mae=1.0 + i, n=50),
                    "baseline": _metrics(100, 20, 30, 2, 10, 0.5, 90, mae=3.0, n=40, ms=50.0),
                },
            }
        )
    return {"meta": {"command": "python3 -m bench.accuracy --fake", "notes": ["fake"]}, "sequences": recs}


def test_pooled_metrics_use_raw_counts():
    res = _fake_results()
    p = report.pool_records(res["sequences"])
    fn = sum(10 + i for i in range(4))
    assert p["dual"]["mota"] == pytest.approx(1 - (4 * 2 + fn + 4 * 1) / 400)
    assert p["dual"]["fp_per_frame"] == pytest.approx(8 / 40)
    assert p["dual"]["idf1"] == pytest.approx(2 * 0.8 * 400 / (400 + 4 * 92))
    assert p["dual"]["speed"]["mae_kmh"] == pytest.approx(sum(1.0 + i for i in range(4)) / 4)


def test_report_writer_produces_table_and_targets(tmp_path):
    res = _fake_results()
    written = report.write_report(res, tmp_path, with_plots=False)
    md = written["markdown"].read_text()
    for i in range(4):
        assert f"| seq{i} |" in md
    assert "**pooled: all**" in md and "python3 -m bench.accuracy --fake" in md
    data = json.loads(written["json"].read_text())
    status = {t["id"]: t["status"] for t in data["targets"]}
    assert status["fp_rate"] == "PASS"  # 0.2 vs 2.0 FP/frame
    assert status["mota_gain"] == "PASS"  # ~85 vs 48 %
    assert status["spread_altitude"] == "PASS"  # MOTA 87 vs 86 %
    assert status["speed_mae"] == "FAIL"  # pooled MAE 2.5 km/h and 5 % exceed both limits
    assert list(data["aggregates"]["by_altitude"]) == ["40 m", "80 m"]
    # a worse dual run flips the FP target
    for r in res["sequences"]:
        r["modes"]["dual"]["num_false_positives"] = 15
    assert report.check_targets(report.aggregates(res["sequences"]))[0]["status"] == "FAIL"


def test_report_plots_are_written(tmp_path):
    written = report.write_report(_fake_results(), tmp_path)
    pngs = sorted(p.name for p in (tmp_path / "img").glob("accuracy_*.png"))
    assert "accuracy_mota.png" in pngs and "accuracy_mota_by_altitude.png" in pngs and len(pngs) >= 8
    assert "](img/accuracy_mota.png)" in written["markdown"].read_text()


def test_condense_keeps_the_reported_numbers():
    ev = {
        "mot": {"mota": 0.5, "idf1": 0.6, "num_false_positives": 3, "fp_per_frame": 0.3},
        "speed": {"n": 4, "mae_kmh": 1.5, "moving": {"mae_kmh": 1.6}, "standing": {"n": 0}},
        "timing": {"ms_per_frame": 80.0},
        "road_mask": {"iou": 0.7},
    }
    out = condense(ev, {"counts": {"tracks": 5}, "timings": {"wall_s": 2.0}})
    assert (
        out["mota"],
        out["speed"]["mae_kmh"],
        out["speed"]["moving_mae_kmh"],
        out["ms_per_frame"],
        out["road_mask_iou"],
        out["tracks"],
    ) == (0.5, 1.5, 1.6, 80.0, 0.7, 5)
    assert Prepared  # the runner's data class is importable without running anything


def test_weights_snapshot_keeps_name_and_hash(tmp_path):
    from bench.accuracy import run

    w = tmp_path / "airpatrol_yolov8n.pt"
    w.write_bytes(b"weights v1")
    copy = run.snapshot(w, tmp_path / "work")
    assert copy.name == w.name and copy.read_bytes() == b"weights v1"
    w.write_bytes(b"weights v2")  # replaced by a training job mid-run: the copy stays as it was
    assert copy.read_bytes() == b"weights v1" and run.snapshot(w, tmp_path / "work") != copy
    line = run._file_line(w, "?", copy)
    assert run._hash_in(line) == run.sha256(copy) != run.sha256(w)
    assert run._hash_in("none (road layer disabled)") is None
